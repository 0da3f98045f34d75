/**
 * The model's buffers a checkpoint manifest records under `plugins.model_buffers` (the moe plugin
 * saves them: DeepSeek-V3's `model.layers.{l}.mlp.gate.e_score_correction_bias`, not trained, so in
 * no unit's states), read and given back to a model by every manifest-driven load: the engine's
 * `loadCheckpoint` (whether or not the engine was created with `restore: manifest.plugins`),
 * `eval`/`generate --from CKPT` and zero-to-fp32. A load that copied parameters only routed with
 * zero biases (eval 6.1579 where Transformers gives 6.1026 on the same weights) and said nothing.
 */
import { CheckpointError } from "./errors.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";

/**
 * The buffers recorded in a manifest's `plugins` (an absent entry: none).
 * @param file the manifest.json, named in errors
 * @throws CheckpointError naming `plugins.model_buffers[.NAME]` when the entry is not an object of
 *   arrays of finite numbers
 */
export function manifestModelBuffers(plugins: unknown, file: string): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  const b = plugins !== null && typeof plugins === "object" ? (plugins as Record<string, unknown>).model_buffers : undefined;
  if (b === undefined) return out;
  if (b === null || typeof b !== "object" || Array.isArray(b)) throw new CheckpointError(file, "field plugins.model_buffers: expected an object of number arrays (the model's buffers by name)");
  for (const [name, v] of Object.entries(b as Record<string, unknown>)) {
    if (!Array.isArray(v) || !v.every((x) => typeof x === "number" && Number.isFinite(x))) throw new CheckpointError(file, `field plugins.model_buffers.${quoteUntrusted(name)}: expected an array of finite numbers`);
    out.set(name, Float32Array.from(v as number[]));
  }
  return out;
}

/**
 * Copy the manifest's recorded buffers into `target` (a model's live buffers by name).
 * @returns the target's buffer names the manifest does not record (they keep their values)
 * @throws CheckpointError for a malformed entry, a recorded buffer the model lacks, or a length
 *   that differs from the model's
 */
export function applyManifestBuffers(target: ReadonlyMap<string, Float32Array>, plugins: unknown, file: string): string[] {
  const saved = manifestModelBuffers(plugins, file);
  for (const [name, v] of saved) {
    const arr = target.get(name);
    if (!arr) throw new CheckpointError(file, `field plugins.model_buffers.${quoteUntrusted(name)}: the model has no such buffer${target.size > 0 ? ` (it has ${[...target.keys()].slice(0, 3).join(", ")}${target.size > 3 ? ", …" : ""})` : ""}`);
    if (arr.length !== v.length) throw new CheckpointError(file, `field plugins.model_buffers.${quoteUntrusted(name)}: ${v.length} values, the model's buffer has ${arr.length}`);
    arr.set(v);
  }
  return [...target.keys()].filter((n) => !saved.has(n));
}
