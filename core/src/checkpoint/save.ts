/**
 * `engine.saveCheckpoint(dir, tag)`: every rank writes the state it owns into one record file,
 * rank 0 writes the manifest, then the tag appears atomically and `latest` is updated.
 *
 * Protocol (all ranks, in this order):
 * 1. Agreement: an all_gather of (hash of the tag, global step) over the world. A rank that calls
 *    saveCheckpoint alone gets a clear error naming the op (the communicator's timeout, or a
 *    mismatch with the collective the other ranks are in) instead of a deadlock; ranks that
 *    disagree on the tag or step get an error naming them.
 * 2. Rank 0 refuses a directory another live process holds the lock of (dir-lock.ts: the trainer
 *    locks `checkpoint.dir` for the whole run), then empties `<dir>/<tag>.tmp/`; barrier.
 * 3. Each rank writes `rank_<r>.zmck` there: for every unit the checkpoint hook's `ownedUnits`
 *    names, the element range its optimizer owns — `[optimStart, optimStart + optimCount)`, the
 *    shard under ZeRO 1–3, the whole unit when replicated — of `params` (the unit's storage dtype),
 *    `master` (mixed precision), `m` and `v`, in chunks of {@link CHUNK_ELEMENTS}. fsync; barrier.
 * 4. Rank 0 opens every rank file (validating it), builds the shard plan from the records, writes
 *    `manifest.json`, fsyncs, renames `<tag>.tmp` → `<tag>`, fsyncs the directory, then replaces
 *    `latest` atomically (write + fsync + rename) and prunes old tags beyond `keep_last`.
 * 5. Rank 0 broadcasts success or failure, so every rank returns or throws together.
 *
 * A `kill -9` at any point leaves the previous tag and `latest` untouched (a half-written
 * `<tag>.tmp` is ignored by readers and removed by the next successful save).
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { HostArray } from "@zeromoe/kernels";
import type { DataState } from "../data/loader.ts";
import type { CheckpointTarget } from "../engine/stateful.ts";
import { lockConflict } from "./dir-lock.ts";
import { CheckpointError } from "./errors.ts";
import {
  checkTag, fsyncDir, listTags, manifestFileEntry, manifestText, MANIFEST_FORMAT, MANIFEST_VERSION, rankFileName, saveLayout, writeFileAtomic,
  type CheckpointManifest, type ManifestPiece, type ManifestUnit, type UnitStateName,
} from "./manifest.ts";
import { RecordFileReader, RecordFileWriter, type RecordCodec, type RecordDType } from "./record-file.ts";
import { parseRecordName, recordName } from "./shard-source.ts";
import { quoteUntrusted } from "../config/quote-untrusted.ts";

/** Elements per record (1 Mi: 4 MiB of f32). */
export const CHUNK_ELEMENTS = 1 << 20;

/** Options of {@link saveCheckpoint}. */
export interface SaveCheckpointOptions {
  /** Training-stream position after the last step (DataLoader.state()), recorded for resume. */
  dataPosition?: DataState | null;
  /** JSON-serialisable state of the caller, returned by loadCheckpoint. */
  clientState?: unknown;
  /** Keep only the newest N tags after this save (0 = keep all). Default `checkpoint.keep_last`. */
  keepLast?: number;
  /** Payload codec (default deflate level 1). */
  codec?: RecordCodec;
  level?: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9;
}

/** What one rank did. */
export interface SaveCheckpointResult {
  tag: string;
  tagDir: string;
  /** Bytes of this rank's file, and the uncompressed payload bytes in it. */
  fileBytes: number;
  rawBytes: number;
  /** Wall time of the whole save on this rank, seconds (collectives included). */
  seconds: number;
  /** Time this rank spent reading device state and writing its file, seconds. */
  writeSeconds: number;
}

/** 32-bit FNV-1a of a string (the agreement token of a tag). */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** Raw little-endian bytes of a host array for a record of `dtype` (f64 host data → f32). */
export function recordBytes(a: HostArray, dtype: RecordDType): Uint8Array {
  const arr = dtype === "f32" && a instanceof Float64Array ? Float32Array.from(a) : a;
  return new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
}

/** Run a collective step of the save, turning a communicator error into one that says which save
 * step failed and why (e.g. a rank that called saveCheckpoint alone). */
async function step<T>(what: string, tag: string, rank: number, f: () => PromiseLike<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    const err = e as Error;
    throw new Error(`saveCheckpoint(${quoteUntrusted(tag)}) on rank ${rank}: ${what} failed — every rank must call saveCheckpoint with the same tag at the same step (${err.name}: ${err.message})`);
  }
}

/**
 * Save `engine`'s state under `<dir>/<tag>` (see the module comment). Every rank must call it with
 * the same `dir` and `tag` between optimizer steps.
 * @throws Error naming the save step when the ranks do not all take part or disagree;
 *   CheckpointError for an invalid tag or a rank file that fails validation; fs errors.
 */
export async function saveCheckpoint(engine: CheckpointTarget, dir: string, tag: string, opts: SaveCheckpointOptions = {}): Promise<SaveCheckpointResult> {
  const t0 = performance.now();
  const env = engine.job;
  const state = engine.stateDict();
  const { comm, be } = env;
  const rank = comm.rank;
  checkTag(tag, dir);
  const tagDir = join(dir, tag);
  const tmpDir = `${tagDir}.tmp`;

  // 1. agreement
  const token = new Float64Array([fnv1a(`${dir}\0${tag}`), state.global_steps]);
  const all = await step("the agreement all_gather", tag, rank, () => comm.allGather(token));
  const disagree: number[] = [];
  for (let r = 0; r < comm.worldSize; r++) if (all[2 * r] !== token[0] || all[2 * r + 1] !== token[1]) disagree.push(r);
  if (disagree.length > 0) throw new Error(`saveCheckpoint(${quoteUntrusted(tag)}) on rank ${rank}: rank(s) [${disagree.join(", ")}] called it with another directory/tag or at another step (this rank: step ${state.global_steps})`);

  // 2. temporary directory
  let prepError: Error | null = null;
  if (rank === 0) {
    try {
      const locked = lockConflict(dir);
      if (locked !== null) throw new CheckpointError(dir, locked);
      mkdirSync(dir, { recursive: true });
      rmSync(tmpDir, { recursive: true, force: true });
      mkdirSync(tmpDir);
    } catch (e) {
      prepError = e as Error;
    }
  }
  const ok0 = await step("the preparation broadcast", tag, rank, () => comm.broadcast(new Int32Array([prepError ? 1 : 0]), 0));
  if (prepError) throw prepError;
  if (ok0[0] !== 0) throw new Error(`saveCheckpoint(${quoteUntrusted(tag)}) on rank ${rank}: rank 0 could not create ${tmpDir}`);

  // 3. this rank's file
  const tw = performance.now();
  // the layout every rank file records (the manifest's zero_stage, ep_size, expert placement),
  // checked against the manifest on load; the plugins' entries are the same on every rank
  const layout = saveLayout(env.config.zero_optimization.stage, env.config.moe?.ep_size ?? 1, engine.manifestEntries());
  const writer = RecordFileWriter.create(join(tmpDir, rankFileName(rank)), rank, { codec: opts.codec, level: opts.level, tag, worldSize: comm.worldSize, layout });
  let fileBytes: number;
  try {
    const owned = new Set(engine.checkpointUnits());
    const mixed = env.paramDtype !== "f32";
    for (const u of engine.units()) {
      if (!owned.has(u)) continue;
      const start = u.optimStart;
      const count = u.optimCount;
      if (count === 0 && u.numel > 0) continue;
      // the optimizer range [start, start + count) lies inside the stored parameters (shard or whole)
      const stored = u.paramStorage();
      const pBuf = stored.buf;
      const pOff = start - stored.start;
      // parameters from the device; master (mixed precision), m, v wherever they live (device
      // buffers, or host memory / NVMe files when offloaded: the unit's readOptimizerState)
      const sources: [UnitStateName, RecordDType, (c: number, n: number) => Promise<HostArray>][] = [
        ["params", u.dtype as RecordDType, (c, n) => be.read({ buf: pBuf, off: pOff + c }, n)],
      ];
      for (const name of mixed ? (["master", "m", "v"] as const) : (["m", "v"] as const)) {
        sources.push([name, "f32", (c, n) => u.readOptimizerState(name, c, n)]);
      }
      for (const [name, dtype, read] of sources) {
        if (count === 0) writer.add(recordName(u.name, name, 0), dtype, 0, 0, new Uint8Array(0));
        for (let c = 0; c < count; c += CHUNK_ELEMENTS) {
          const n = Math.min(CHUNK_ELEMENTS, count - c);
          const host = await read(c, n);
          writer.add(recordName(u.name, name, start + c), dtype, start + c, n, recordBytes(host, dtype));
        }
      }
    }
    fileBytes = writer.finish(rank);
  } catch (e) {
    writer.abort();
    throw e;
  }
  const writeSeconds = (performance.now() - tw) / 1000;
  await step("the barrier after writing rank files", tag, rank, () => comm.barrier());

  // 4. manifest, rename, latest (rank 0)
  let finError: Error | null = null;
  if (rank === 0) {
    try {
      const manifest = buildManifest(engine, tag, tmpDir, opts, engine.manifestEntries());
      writeFileAtomic(join(tmpDir, "manifest.json"), manifestText(manifest));
      fsyncDir(tmpDir);
      const old = `${tagDir}.old.tmp`;
      if (existsSync(tagDir)) {
        rmSync(old, { recursive: true, force: true });
        renameSync(tagDir, old);
      }
      renameSync(tmpDir, tagDir);
      fsyncDir(dir);
      rmSync(old, { recursive: true, force: true });
      writeFileAtomic(join(dir, "latest"), tag + "\n");
      fsyncDir(dir);
      const keep = opts.keepLast ?? env.config.checkpoint.keep_last;
      if (keep > 0) {
        const tags = listTags(dir, readdirSync(dir)).filter((t) => t.tag !== tag);
        for (const t of tags.slice(0, Math.max(0, tags.length - (keep - 1)))) rmSync(join(dir, t.tag), { recursive: true, force: true });
      }
      removeStaleTemporaries(dir);
    } catch (e) {
      finError = e as Error;
    }
  }
  // 5. everyone learns the outcome
  const fin = await step("the completion broadcast", tag, rank, () => comm.broadcast(new Int32Array([finError ? 1 : 0]), 0));
  if (finError) throw finError;
  if (fin[0] !== 0) throw new Error(`saveCheckpoint(${quoteUntrusted(tag)}) on rank ${rank}: rank 0 failed to write the manifest or rename ${tmpDir}`);
  return { tag, tagDir, fileBytes, rawBytes: writer.rawBytes, seconds: (performance.now() - t0) / 1000, writeSeconds };
}

/** Rank 0, after a complete save: remove the temporary directories of saves that never finished
 * (`<tag>.tmp`, `<tag>.old.tmp`: killed, or failed on a full disk), which otherwise stayed until a
 * save of the same tag, each as large as a checkpoint. Only directories whose name is a valid tag
 * plus one of those suffixes; best effort (a failure to remove one leaves it, the save stands). The
 * trainer's lock keeps other runs out of `dir`, so none of them is a save in progress. */
function removeStaleTemporaries(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (!e.isDirectory() || !e.name.endsWith(".tmp")) continue;
    const tag = e.name.endsWith(".old.tmp") ? e.name.slice(0, -".old.tmp".length) : e.name.slice(0, -".tmp".length);
    try {
      checkTag(tag, dir);
      rmSync(join(dir, e.name), { recursive: true, force: true });
    } catch {
      // not a tag's temporary directory, or not removable: left as it is
    }
  }
}

/** Rank 0: the manifest from the engine and the (validated) rank files in `tmpDir`. */
function buildManifest(engine: CheckpointTarget, tag: string, tmpDir: string, opts: SaveCheckpointOptions, entries: Record<string, unknown>): CheckpointManifest {
  const env = engine.job;
  const state = engine.stateDict();
  const W = env.comm.worldSize;
  const files: CheckpointManifest["files"] = [];
  const pieces = new Map<string, Map<UnitStateName, ManifestPiece[]>>();
  for (let r = 0; r < W; r++) {
    const file = join(tmpDir, rankFileName(r));
    const rd = RecordFileReader.open(file);
    try {
      for (const e of rd.records) {
        const p = parseRecordName(e.name);
        if (!p) throw new CheckpointError(file, "unexpected record name", e.name);
        let byState = pieces.get(p.unit);
        if (!byState) pieces.set(p.unit, (byState = new Map()));
        let list = byState.get(p.state);
        if (!list) byState.set(p.state, (list = []));
        const last = list[list.length - 1];
        if (last && last.rank === r && last.start + last.count === e.start) last.count += e.count;
        else list.push({ rank: r, start: e.start, count: e.count });
      }
      files.push(manifestFileEntry(r, rd));
    } finally {
      rd.close();
    }
  }
  const units: ManifestUnit[] = [];
  for (const u of engine.modelUnits) {
    const byState = pieces.get(u.name);
    const p = byState?.get("params");
    if (!byState || !p) throw new CheckpointError(tmpDir, `no rank wrote unit ${quoteUntrusted(u.name)} (checkpoint hook ownedUnits must cover every unit once)`);
    p.sort((a, b) => a.start - b.start);
    const merged = p.filter((x) => x.count > 0 || u.numel === 0);
    let next = 0;
    for (const x of merged) {
      if (x.start !== next) throw new CheckpointError(tmpDir, `unit ${quoteUntrusted(u.name)} params written as overlapping or gapped ranges (at ${x.start}, expected ${next})`);
      next += x.count;
    }
    if (next !== u.numel) throw new CheckpointError(tmpDir, `unit ${quoteUntrusted(u.name)} params cover [0, ${next}), expected [0, ${u.numel})`);
    const st = engine.handleOf(u);
    units.push({
      name: u.name,
      kind: u.kind,
      layer: u.layer ?? null,
      expert: u.expert ?? null,
      dtype: u.dtype as RecordDType,
      numel: u.numel,
      group_size: new Set(merged.map((x) => x.rank)).size,
      shard_size: st ? st.plan.shardSize : Math.max(0, ...merged.map((x) => x.count)),
      params: u.params.map((q) => ({ name: q.name, shape: [...q.shape], offset: q.offset })),
      pieces: merged.length > 0 ? merged : [{ rank: p[0]!.rank, start: 0, count: 0 }],
      states: [...byState.keys()],
    });
  }
  const cfg = env.config;
  return {
    format: MANIFEST_FORMAT,
    format_version: MANIFEST_VERSION,
    tag,
    created: new Date().toISOString(),
    world_size: W,
    zero_stage: cfg.zero_optimization.stage,
    ep_size: cfg.moe?.ep_size ?? 1,
    param_dtype: env.paramDtype,
    global_steps: state.global_steps,
    applied_steps: state.applied_steps,
    units,
    plugins: entries,
    config: cfg,
    data_position: opts.dataPosition ?? null,
    rng: { kind: "counter", seed: cfg.seed, step: state.global_steps },
    scheduler: state.scheduler,
    loss_scaler: state.loss_scaler,
    files,
    client_state: opts.clientState ?? null,
  };
}
