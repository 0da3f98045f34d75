/**
 * `engine.loadCheckpoint(path, tag?)`: restore parameters, the model's buffers (manifest-buffers.ts),
 * optimizer states, step counters, scheduler and loss scaler from a checkpoint saved at any world size, ZeRO stage and ep_size.
 *
 * Each rank fills only what its own plan holds, reading the element ranges it needs from whichever
 * rank files hold them (shard-source.ts), chunk by chunk straight into device buffers:
 * - parameters: its shard `[shardStart, shardStart + owned)` (ZeRO-3) or the whole unit
 *   (replicated), in the unit's storage dtype;
 * - `master` (mixed precision), `m`, `v`: its optimizer range `[optimStart, optimStart + optimCount)`.
 * The loading job's world size, stage and ep_size may differ from the saving job's (resharding on
 * load; DeepSpeed needs a separate "universal checkpoint" conversion for this). The model must be
 * the same: every unit with the same element count, parameter names/shapes and dtype.
 *
 * Resume is exact (same losses as an uninterrupted run) when the caller also restores the data
 * position the manifest records (`dataPosition` of the result): every other random stream is
 * counter-based and keyed by seed and step, which the engine's step counters restore.
 */
import type { Buf } from "@zeromoe/kernels";
import type { DataState } from "../data/loader.ts";
import type { UnitHandle } from "../engine/plugin-context.ts";
import type { CheckpointTarget } from "../engine/stateful.ts";
import { CheckpointError } from "./errors.ts";
import { locateCheckpoint, readManifest, type CheckpointManifest, type UnitStateName } from "./manifest.ts";
import { ShardSource } from "./shard-source.ts";
import { applyManifestBuffers } from "./manifest-buffers.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { quoteUntrusted } from "../config/quote-untrusted.ts";

/** What {@link loadCheckpoint} restored. */
export interface LoadCheckpointResult {
  tag: string;
  tagDir: string;
  manifest: CheckpointManifest;
  /** The saved data position (give it to DataLoader.loadState), or null. */
  dataPosition: DataState | null;
  clientState: unknown;
  /** True when world size or ep_size differ from the saving job's. */
  resharded: boolean;
  /** Payload bytes this rank decompressed, and the wall time, seconds. */
  bytesRead: number;
  seconds: number;
}

/** Options of {@link loadCheckpoint}. */
export interface LoadCheckpointOptions {
  /** Restore master/m/v and the counters (default true); false loads parameters only. */
  optimizerStates?: boolean;
}

/** A manifest shape for a message: at most 8 dimensions shown (readManifest bounds them too). */
function shapeText(shape: readonly number[]): string {
  return shape.slice(0, 8).join(", ") + (shape.length > 8 ? `, … (${shape.length} dimensions)` : "");
}

/** Check that the engine's model matches the manifest, unit by unit. @throws CheckpointError naming the unit. */
export function checkModelMatches(engine: Pick<CheckpointTarget, "modelUnits">, m: CheckpointManifest, file: string): void {
  const units = engine.modelUnits;
  const byName = new Map(m.units.map((u, k) => [u.name, { ...u, index: k }]));
  if (m.units.length !== units.length) throw new CheckpointError(file, `has ${m.units.length} units, the model has ${units.length} (another model?)`);
  for (const u of units) {
    const mu = byName.get(u.name);
    if (!mu) throw new CheckpointError(file, `has no unit ${quoteUntrusted(u.name)} (another model?)`);
    if (mu.numel !== u.numel) throw new CheckpointError(file, `unit ${quoteUntrusted(u.name)} has ${mu.numel} elements, the model's has ${u.numel}`);
    if (mu.dtype !== u.dtype) throw new CheckpointError(file, `unit ${quoteUntrusted(u.name)} was saved as ${mu.dtype}, the job trains it as ${u.dtype} (load with the same bf16/fp16 setting, or export with zero-to-fp32 and use --init-from)`);
    if (mu.params.length !== u.params.length) throw new CheckpointError(file, `unit ${quoteUntrusted(u.name)} has ${mu.params.length} parameters, the model's has ${u.params.length}`);
    u.params.forEach((p, i) => {
      const q = mu.params[i]!;
      if (q.name !== p.name || q.offset !== p.offset || q.shape.join(",") !== p.shape.join(",")) {
        // the manifest's name is untrusted (a re-signed one reached the terminal raw, 70 KB): quoted
        throw new CheckpointError(file, `field units[${mu.index}].params[${i}]: unit ${quoteUntrusted(u.name)} parameter ${i} is ${quoteUntrusted(q.name)} [${shapeText(q.shape)}] at ${q.offset}, the model has ${quoteUntrusted(p.name)} [${p.shape.join(", ")}] at ${p.offset}`);
      }
    });
  }
}

/** Stream a saved range into `buf` at element `off`. */
function fill(engine: CheckpointTarget, src: ShardSource, unit: string, state: UnitStateName, start: number, count: number, buf: Buf, off: number): void {
  const be = engine.job.be;
  src.readRange(unit, state, start, count, (c) => {
    if (c.dtype !== buf.dtype) throw new CheckpointError(src.tagDir, `unit ${quoteUntrusted(unit)} state ${quoteUntrusted(state)} holds ${c.dtype}, the buffer is ${buf.dtype}`);
    const data = c.dtype === "f32" ? new Float32Array(c.bytes.buffer, c.bytes.byteOffset, c.n) : new Uint16Array(c.bytes.buffer, c.bytes.byteOffset, c.n);
    be.write({ buf, off: off + c.at }, data);
  });
}

/** Stream a saved optimizer range of `u` into its offloaded states (`writeOptimizerState`). */
async function fillOptimizer(src: ShardSource, u: UnitHandle, state: "master" | "m" | "v", count: number): Promise<void> {
  const writes: Promise<void>[] = [];
  src.readRange(u.name, state, u.optimStart, count, (c) => {
    if (c.dtype !== "f32") throw new CheckpointError(src.tagDir, `unit ${quoteUntrusted(u.name)} state ${quoteUntrusted(state)} holds ${c.dtype}, expected f32`);
    // copy: the chunk's bytes may be reused by the reader after the callback
    writes.push(u.writeOptimizerState(state, c.at, new Float32Array(c.bytes.buffer.slice(c.bytes.byteOffset, c.bytes.byteOffset + c.n * 4))));
  });
  await Promise.all(writes);
}

/**
 * Find and read the manifest of the checkpoint `path` names, without loading anything (a resumed job
 * gives its `plugins` entries to Engine.create before partitioning).
 * @param path a checkpoint root (its `latest` tag, or `tag`), a tag directory, or a bare tag name
 *   under `checkpointDir` (`--resume <tag>`)
 * @throws CheckpointError naming the file for a missing or malformed checkpoint
 */
export function readCheckpointManifest(path: string, checkpointDir: string | null, tag?: string): { loc: { tag: string; tagDir: string }; manifest: CheckpointManifest } {
  const bare = tag === undefined && !existsSync(path) && checkpointDir !== null && /^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(path) && existsSync(join(checkpointDir, path, "manifest.json"));
  const loc = bare ? locateCheckpoint(checkpointDir!, path) : locateCheckpoint(path, tag);
  return { loc, manifest: readManifest(loc.tagDir) };
}

/**
 * Load a checkpoint into `engine` (see the module comment). Every rank calls it; it runs no
 * collective, so ranks may call it independently.
 * @param path a checkpoint root (its `latest` tag, or `tag`), a tag directory, or a bare tag name
 *   under the job's `checkpoint.dir`.
 * @throws CheckpointError naming the file/record/field for a missing, damaged or incompatible
 *   checkpoint.
 */
export async function loadCheckpoint(engine: CheckpointTarget, path: string, tag?: string, opts: LoadCheckpointOptions = {}): Promise<LoadCheckpointResult> {
  const t0 = performance.now();
  const { loc, manifest } = readCheckpointManifest(path, engine.job.config.checkpoint.dir, tag);
  const file = join(loc.tagDir, "manifest.json");
  checkModelMatches(engine, manifest, file);
  const env = engine.job;
  const mixed = env.paramDtype !== "f32";
  const withOptim = opts.optimizerStates ?? true;
  if (withOptim && (manifest.param_dtype !== "f32") !== mixed) throw new CheckpointError(file, `param_dtype ${manifest.param_dtype} was saved, the job trains with ${env.paramDtype}`);
  const src = new ShardSource(loc.tagDir, manifest);
  try {
    for (const u of engine.units()) {
      if (u.numel === 0) continue;
      const stored = u.paramStorage();
      fill(engine, src, u.name, "params", stored.start, stored.count, stored.buf, 0);
      const n = u.optimCount;
      if (n === 0 || !u.trainable) continue; // a frozen unit keeps no optimizer state
      if (u.optimizerDevice !== "device") {
        // offloaded states (host memory or NVMe files): through the unit's verbs
        if (withOptim) {
          if (mixed) await fillOptimizer(src, u, "master", n);
          else await engine.initMaster(u); // fp32: the host master is the loaded parameters
          await fillOptimizer(src, u, "m", n);
          await fillOptimizer(src, u, "v", n);
        } else {
          await engine.initMaster(u);
          await u.writeOptimizerState("m", 0, new Float32Array(n));
          await u.writeOptimizerState("v", 0, new Float32Array(n));
        }
        continue;
      }
      const opt = u.optimizerState();
      if (withOptim) {
        if (mixed) fill(engine, src, u.name, "master", u.optimStart, n, opt.master!, 0);
        fill(engine, src, u.name, "m", u.optimStart, n, opt.m, 0);
        fill(engine, src, u.name, "v", u.optimStart, n, opt.v, 0);
      } else if (mixed) {
        // parameters only: the master copy starts from the loaded 16-bit values
        await engine.initMaster(u);
        env.be.fill({ buf: opt.m, off: 0 }, 0, n);
        env.be.fill({ buf: opt.v, off: 0 }, 0, n);
      }
    }
  } finally {
    src.close();
  }
  await env.be.flush();
  // the model's buffers (DeepSeek-V3's e_score_correction_bias): in no unit, recorded in the
  // manifest; given back here whether or not the engine was created with restore: manifest.plugins
  const unrecorded = applyManifestBuffers(engine.modelBuffers(), manifest.plugins ?? {}, file);
  if (unrecorded.length > 0 && env.rank === 0) env.warn(`loadCheckpoint: ${file} records no plugins.model_buffers for ${unrecorded.slice(0, 3).join(", ")}${unrecorded.length > 3 ? ` (+${unrecorded.length - 3} more)` : ""}; they keep their current values`);
  if (withOptim) {
    engine.loadStateDict({ global_steps: manifest.global_steps, applied_steps: manifest.applied_steps, scheduler: manifest.scheduler ?? null, loss_scaler: manifest.loss_scaler });
  }
  const epSize = env.config.moe?.ep_size ?? 1;
  // plugins compare their saved manifest entries with their state now (e.g. a different expert
  // placement: loaded by unit name, so training is unaffected, but worth saying)
  for (const w of engine.checkManifestEntries(manifest.plugins ?? {})) {
    if (env.rank === 0) env.warn(`loadCheckpoint: ${w} (${file})`);
  }
  return {
    tag: loc.tag,
    tagDir: loc.tagDir,
    manifest,
    dataPosition: manifest.data_position ?? null,
    clientState: manifest.client_state ?? null,
    resharded: manifest.world_size !== env.comm.worldSize || manifest.ep_size !== epSize,
    bytesRead: src.bytesRead,
    seconds: (performance.now() - t0) / 1000,
  };
}
