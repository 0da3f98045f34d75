/**
 * A checkpoint manifest's parameter list (`units[i].params[j]`: name, shape, offset) checked against
 * the parameters of the model its own `config.model` describes, before anything is read or
 * allocated. The manifest's checksum only shows it was not edited by accident: a re-signed one
 * whose shapes disagree with its config was a bare Error from nn/state-dict.ts on eval (or, with the
 * same element count, loaded into the wrong layout), and zero-to-fp32 wrote such tensors out as
 * they were, under a config.json that cannot load them.
 *
 * The model's names and shapes come from the model built unallocated
 * (`createModel(…, { allocate: false })` in the callers: no parameter memory).
 */
import { quoteUntrusted } from "../config/quote-untrusted.ts";
import { CheckpointError } from "./errors.ts";
import type { CheckpointManifest } from "./manifest.ts";

/** One parameter of the model: its name and shape (elements per dimension). */
export interface ModelParamShape {
  name: string;
  shape: readonly number[];
}

/** A manifest shape for a message: at most 8 dimensions shown (readManifest bounds them too). */
function shapeText(shape: readonly number[]): string {
  return shape.slice(0, 8).join(", ") + (shape.length > 8 ? `, … (${shape.length} dimensions)` : "");
}

/**
 * Every parameter the manifest lists is one of `model`'s, with its shape, listed once, within its
 * unit's elements; and every parameter of `model` is listed.
 * @param m the manifest (readManifest checked its structure)
 * @param file the manifest's path, for messages
 * @param model the parameters of the model built from `m.config.model`
 * @param modelType `m.config.model.model_type`, for messages
 * @throws CheckpointError naming `file` and the field `units[i].params[j]`, the values quoted
 *   (quote-untrusted.ts), or the parameters the manifest lacks.
 */
export function checkManifestParams(m: CheckpointManifest, file: string, model: readonly ModelParamShape[], modelType: string): void {
  const byName = new Map(model.map((p) => [p.name, p]));
  const seen = new Set<string>();
  for (const [i, u] of m.units.entries()) {
    for (const [j, p] of u.params.entries()) {
      const field = `field units[${i}].params[${j}]`;
      const param = byName.get(p.name);
      if (param === undefined) throw new CheckpointError(file, `${field}.name: holds parameter ${quoteUntrusted(p.name)}, which the ${modelType} model does not have`);
      if (p.shape.length !== param.shape.length || p.shape.some((d, k) => d !== param.shape[k])) {
        throw new CheckpointError(file, `${field}.shape: ${quoteUntrusted(p.name)} is [${shapeText(p.shape)}], the model's is [${param.shape.join(", ")}] (the manifest's config and its shard plan disagree)`);
      }
      if (seen.has(p.name)) throw new CheckpointError(file, `${field}.name: ${quoteUntrusted(p.name)} is listed twice`);
      seen.add(p.name);
      const numel = param.shape.reduce((a, b) => a * b, 1);
      if (!(Number.isSafeInteger(p.offset) && p.offset >= 0 && p.offset + numel <= u.numel)) {
        throw new CheckpointError(file, `${field}.offset: ${quoteUntrusted(p.name)} at ${p.offset} with ${numel} elements does not fit in unit ${quoteUntrusted(u.name)} of ${u.numel} elements`);
      }
    }
  }
  const missing = model.filter((p) => !seen.has(p.name)).map((p) => p.name);
  if (missing.length > 0) throw new CheckpointError(file, `lacks parameters ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ` (+${missing.length - 5} more)` : ""}`);
}
