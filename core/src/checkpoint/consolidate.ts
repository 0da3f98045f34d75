/**
 * Consolidate a sharded checkpoint into one fp32 safetensors file with Hugging Face names (the
 * counterpart of DeepSpeed's `zero_to_fp32.py`), streaming unit by unit — or, with
 * `maxShardSize`, into a Hub directory (config.json + shards + index, as `save_pretrained` with
 * `max_shard_size`; hub-export.ts) that Transformers' `from_pretrained` and `--init-from DIR` read.
 *
 * Values: the fp32 master copy under mixed precision (`master` records), the parameters themselves
 * under fp32 training. Memory: the output writer plus one unit's full fp32 tensors at a time (each
 * unit is read chunk by chunk from whichever rank files hold it, written, then dropped), so a model
 * larger than memory consolidates as long as its largest unit fits.
 */
import { manifestModelBuffers } from "./manifest-buffers.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { locateCheckpoint, prunedTagError, prunedWhileRead, readManifest, type CheckpointLocation, type CheckpointManifest } from "./manifest.ts";
import { manifestModelConfig } from "./manifest-model.ts";
import { checkManifestParams } from "./manifest-params.ts";
import { CpuBackend } from "@zeromoe/kernels";
import { createModel } from "../engine/model-factory.ts";
import { pathForMessage, quoteUntrusted } from "../config/quote-untrusted.ts";
import { CheckpointError } from "./errors.ts";
import { writeHfConfig } from "./hf-config.ts";
import { copyHubSideFiles, sideFileSources } from "./hub-side-files.ts";
import { HubDirWriter } from "./hub-export.ts";
import { SafetensorsWriter } from "./safetensors.ts";
import { ShardSource } from "./shard-source.ts";

/** Options of {@link zeroToFp32}. */
export interface ConsolidateOptions {
  /** Write `out` as a Hugging Face Hub directory (config.json, shards of at most this many bytes,
   * index when there are several; hub-export.ts) instead of one safetensors file. */
  maxShardSize?: number;
}


/** What {@link zeroToFp32} wrote. */
export interface ConsolidateResult {
  tag: string;
  tensors: number;
  /** Parameters (elements) written. */
  numel: number;
  /** Output bytes (tensor data only). */
  bytes: number;
  /** Largest unit (elements): the bound on tensors held in memory at once. */
  largestUnit: number;
  /** Source of the values: "master" (mixed precision) or "params" (fp32 training). */
  source: "master" | "params";
  seconds: number;
}

/**
 * Read the manifest of the located tag `loc` and open its rank files (ShardSource holds them open:
 * a later removal of the directory no longer affects the read). A job saving into the same root
 * with `checkpoint.keep_last` removes old tags: when the tag's manifest.json is gone by the time
 * it is read (manifest.json, or a rank file that pruning removed first), the error says the tag was
 * pruned and which tag is newest now (manifest.ts prunedWhileRead), instead of the
 * "manifest.json: not found" / "cannot open: ENOENT" of a damaged checkpoint.
 * @throws CheckpointError (pruned; or the readers' own for a damaged checkpoint).
 */
export function openLocatedCheckpoint(loc: CheckpointLocation): { manifest: CheckpointManifest; src: ShardSource } {
  try {
    const manifest = readManifest(loc.tagDir);
    return { manifest, src: new ShardSource(loc.tagDir, manifest) };
  } catch (e) {
    // a file went missing: manifest.json, or a rank file removed before it (prunedWhileRead)
    if (!(e instanceof CheckpointError)) throw e;
    const newest = prunedWhileRead(loc);
    if (newest === null) throw e;
    throw prunedTagError(loc, newest);
  }
}

/**
 * Write `out` from the checkpoint at `path` (a checkpoint root — its `latest`, or `tag` — or a tag
 * directory; or a location locateCheckpoint already returned).
 * @throws CheckpointError for a missing/damaged checkpoint (naming the file and record), also for
 *   a tag pruned while being read, and for a manifest parameter that is not its config's model's
 *   (name, shape, listed twice, or missing: checkManifestParams); ConfigError for a manifest whose
 *   model config is not valid;
 *   SafetensorsError / fs errors while writing (the partial output is removed).
 */
export function zeroToFp32(path: string | CheckpointLocation, out: string, tag?: string, opts: ConsolidateOptions = {}): ConsolidateResult {
  const t0 = performance.now();
  const loc = typeof path === "string" ? locateCheckpoint(path, tag) : path;
  const { manifest: m, src } = openLocatedCheckpoint(loc);
  const etp = (m.config as { moe?: { etp_size?: number } | null } | null)?.moe?.etp_size ?? 1;
  if (etp > 1) {
    src.close();
    throw new CheckpointError(join(loc.tagDir, "manifest.json"), `was saved with moe.etp_size ${etp}: its experts are etp slices, and consolidating them into Hugging Face tensors is not supported`);
  }
  // the config.json of a Hub export is written from it: checked as a config.json is read
  let model: ReturnType<typeof manifestModelConfig>;
  try {
    model = manifestModelConfig(m, join(loc.tagDir, "manifest.json"));
    // the tensors written are the manifest's: each must be a parameter of that config's model with
    // its shape (a re-signed manifest's edited shape or name was written out as it was)
    const shapes = createModel(new CpuBackend(), model, { dtype: "f32", seed: 0, allocate: false });
    try {
      checkManifestParams(m, join(loc.tagDir, "manifest.json"), shapes.parameters().map((p) => ({ name: p.name, shape: p.shape })), model.model_type);
    } finally {
      shapes.destroy();
    }
  } catch (e) {
    src.close();
    throw e;
  }
  const source = m.param_dtype === "f32" ? "params" : "master";
  const specs = m.units.flatMap((u) => u.params.map((p) => ({ name: p.name, dtype: "F32" as const, shape: p.shape })));
  // the model's buffers the moe plugin saved (DeepSeek-V3's e_score_correction_bias), after the parameters
  let buffers: [string, Float32Array][];
  try {
    buffers = [...manifestModelBuffers(m.plugins, join(loc.tagDir, "manifest.json"))];
  } catch (e) {
    src.close();
    throw e;
  }
  for (const [name, v] of buffers) specs.push({ name, dtype: "F32", shape: [v.length] });
  const meta = { format: "pt", "zeromoe.tag": loc.tag, "zeromoe.source": join(loc.tagDir) };
  // a Hub directory (hub-export.ts: shards of maxShardSize, index, config.json) or one file
  const w = opts.maxShardSize !== undefined ? HubDirWriter.create(out, specs, opts.maxShardSize, meta) : SafetensorsWriter.create(out, specs, meta);
  let numel = 0;
  let largest = 0;
  try {
    for (const u of m.units) {
      largest = Math.max(largest, u.numel);
      const full = src.readF32(u.name, source, 0, u.numel);
      for (const p of u.params) {
        const n = p.shape.reduce((a, b) => a * b, 1);
        w.writeTensor(p.name, full.subarray(p.offset, p.offset + n));
        numel += n;
      }
    }
    for (const [name, v] of buffers) w.writeTensor(name, v);
    w.finish();
    if (opts.maxShardSize !== undefined) {
      writeHfConfig(out, model, "f32");
      copyHubSideFiles(out, sideFileSources(m.config));
    }
  } catch (e) {
    w.abort();
    throw e;
  } finally {
    src.close();
  }
  return { tag: loc.tag, tensors: specs.length, numel, bytes: numel * 4, largestUnit: largest, source, seconds: (performance.now() - t0) / 1000 };
}
