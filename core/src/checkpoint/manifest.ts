/**
 * The checkpoint manifest (`<dir>/<tag>/manifest.json`) and the directory layout around it.
 *
 * ```
 * <dir>/latest               the newest complete tag's name (one line), replaced atomically
 * <dir>/<tag>/manifest.json  this file's {@link CheckpointManifest}
 * <dir>/<tag>/rank_00000.zmck  one record file per rank (record-file.ts)
 * <dir>/<tag>.tmp/           a save in progress (ignored by readers; removed by the next save)
 * ```
 *
 * The manifest says everything needed to resume exactly and to reshard: format version, world
 * size, ZeRO stage, ep_size, parameter dtype, the shard plan (every unit's numel, dtype, group
 * size, shard size, parameters, and which rank file holds which element range), the expert
 * placement, the job config, the data position, RNG state, scheduler and loss-scaler state, and
 * the step counters. It is read as untrusted input: size-limited, and every field used is checked
 * (errors name the file and the field).
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { JobConfig } from "../config/types.ts";
import type { DataState } from "../data/loader.ts";
import type { LossScalerState } from "../optim/loss-scaler.ts";
import type { SchedulerState } from "../optim/schedulers.ts";
import { CheckpointError } from "./errors.ts";
import type { RecordDType } from "./record-file.ts";

/** `format` field of every manifest. */
export const MANIFEST_FORMAT = "zeromoe-checkpoint";
/** Manifest format version this code writes and reads. */
export const MANIFEST_VERSION = 1;
/** Largest manifest accepted (bytes). */
export const MAX_MANIFEST_BYTES = 256 << 20;
/** States a unit's records may hold. */
export type UnitStateName = "params" | "master" | "m" | "v";
export const UNIT_STATE_NAMES: readonly UnitStateName[] = ["params", "master", "m", "v"];

/** One parameter of a unit, as the manifest records it (Hugging Face name and shape). */
export interface ManifestParam {
  name: string;
  shape: number[];
  /** Element offset in the unit's flat buffer. */
  offset: number;
}

/** Element range of a unit held by one rank file. */
export interface ManifestPiece {
  rank: number;
  start: number;
  count: number;
}

/** One parameter unit in the shard plan. */
export interface ManifestUnit {
  name: string;
  kind: "embed" | "layer" | "expert" | "head";
  layer: number | null;
  expert: number | null;
  /** Storage dtype of the `params` records (`master`, `m`, `v` are f32). */
  dtype: RecordDType;
  numel: number;
  /** Ranks whose files hold a part of the unit, and the saving job's shard size (informational:
   * loading uses `pieces`). */
  group_size: number;
  shard_size: number;
  params: ManifestParam[];
  /** Which rank file holds which range; the pieces tile [0, numel) exactly (sorted by start). */
  pieces: ManifestPiece[];
  /** States present in the records (`params`, `m`, `v`, plus `master` under mixed precision). */
  states: UnitStateName[];
}

/** The whole manifest. */
export interface CheckpointManifest {
  format: typeof MANIFEST_FORMAT;
  format_version: number;
  tag: string;
  created: string;
  world_size: number;
  zero_stage: number;
  ep_size: number;
  param_dtype: "f32" | "bf16" | "f16";
  /** Optimizer steps attempted (skipped included) and applied so far. */
  global_steps: number;
  applied_steps: number;
  units: ManifestUnit[];
  /** The moe plugin's placement record (plugins/moe placement.ts: strategy, ep_size, owner per
   * layer and expert), or null for a dense model or ep_size 1. */
  expert_placement: unknown;
  /** Every entry the plugins added through the checkpoint hook's `manifest` (e.g. `moe`). */
  plugins: Record<string, unknown>;
  config: JobConfig;
  /** Training-stream position after the last saved step (core/src/data), or null. */
  data_position: DataState | null;
  /** All randomness is counter-based (Philox keyed by seed, step, rank, micro-batch): the seed and
   * the step counter are the whole RNG state. */
  rng: { kind: "counter"; seed: number; step: number };
  scheduler: SchedulerState | null;
  loss_scaler: LossScalerState;
  /** One entry per rank file. */
  files: { rank: number; file: string; bytes: number; records: number }[];
  /** Anything the caller passed as client state (JSON). */
  client_state: unknown;
}

/** File name of rank `r`'s records. */
export function rankFileName(rank: number): string {
  return `rank_${String(rank).padStart(5, "0")}.zmck`;
}

/** Tags are single path components of letters, digits, `.`, `_`, `-` (not starting with a dot). */
export function checkTag(tag: string, where: string): void {
  if (typeof tag !== "string" || !/^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$/.test(tag) || tag.endsWith(".tmp")) {
    throw new CheckpointError(where, `invalid tag ${JSON.stringify(tag)}: expected letters, digits, ".", "_" or "-" (not starting with "." nor ending with ".tmp")`);
  }
}

/** Write `text` to `path` through `path.tmp` + fsync + rename (atomic on POSIX). */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    const b = Buffer.from(text);
    let done = 0;
    while (done < b.length) done += writeSync(fd, b, done, b.length - done);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** fsync a directory (so a rename inside it is durable). */
export function fsyncDir(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Where a checkpoint lives: its tag directory and tag name. */
export interface CheckpointLocation {
  /** The checkpoint root (holds `latest`), or the tag's parent. */
  dir: string;
  tag: string;
  /** `<dir>/<tag>`. */
  tagDir: string;
}

/**
 * Find a checkpoint: `path` is a tag directory (holds manifest.json), or a checkpoint root whose
 * `latest` names the tag (or `tag` is given).
 * @throws CheckpointError when nothing is found, `latest` is missing/invalid, or the tag has no
 *   manifest (an interrupted save).
 */
export function locateCheckpoint(path: string, tag?: string): CheckpointLocation {
  if (tag === undefined && existsSync(join(path, "manifest.json"))) {
    const parts = path.replace(/\/+$/, "").split("/");
    const t = parts.pop()!;
    return { dir: parts.join("/") || ".", tag: t, tagDir: path };
  }
  if (!existsSync(path) || !statSync(path).isDirectory()) throw new CheckpointError(path, "checkpoint directory not found");
  let t = tag;
  if (t === undefined) {
    const latest = join(path, "latest");
    if (!existsSync(latest)) throw new CheckpointError(path, `no "latest" file and no manifest.json: not a checkpoint directory (or no save completed)`);
    const st = statSync(latest);
    if (st.size > 4096) throw new CheckpointError(latest, `is ${st.size} bytes; expected a tag name`);
    t = readFileSync(latest, "utf8").trim();
  }
  checkTag(t, join(path, "latest"));
  const tagDir = join(path, t);
  if (!existsSync(join(tagDir, "manifest.json"))) throw new CheckpointError(tagDir, "has no manifest.json (missing tag or an interrupted save)");
  return { dir: path, tag: t, tagDir };
}

function fail(file: string, field: string, expected: string, got: unknown): never {
  const s = JSON.stringify(got);
  throw new CheckpointError(file, `field ${field}: expected ${expected}, got ${s === undefined ? "nothing" : s.length > 80 ? s.slice(0, 80) + "…" : s}`);
}

function uint(file: string, field: string, v: unknown, min = 0): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) fail(file, field, `an integer ≥ ${min}`, v);
  return v;
}

/**
 * Read and validate `<tagDir>/manifest.json`.
 * @throws CheckpointError naming the file and field for an oversize or unparsable file, a wrong
 *   format/version, or a shard plan whose pieces do not tile each unit.
 */
export function readManifest(tagDir: string): CheckpointManifest {
  const file = join(tagDir, "manifest.json");
  if (!existsSync(file)) throw new CheckpointError(file, "not found");
  const size = statSync(file).size;
  if (size > MAX_MANIFEST_BYTES) throw new CheckpointError(file, `is ${size} bytes, over the ${MAX_MANIFEST_BYTES}-byte limit`);
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new CheckpointError(file, `is not valid JSON: ${(e as Error).message}`);
  }
  if (!m || typeof m !== "object" || Array.isArray(m)) throw new CheckpointError(file, "is not a JSON object");
  if (m.format !== MANIFEST_FORMAT) fail(file, "format", JSON.stringify(MANIFEST_FORMAT), m.format);
  if (m.format_version !== MANIFEST_VERSION) fail(file, "format_version", String(MANIFEST_VERSION), m.format_version);
  const W = uint(file, "world_size", m.world_size, 1);
  uint(file, "zero_stage", m.zero_stage);
  uint(file, "ep_size", m.ep_size, 1);
  uint(file, "global_steps", m.global_steps);
  uint(file, "applied_steps", m.applied_steps);
  if (!["f32", "bf16", "f16"].includes(m.param_dtype as string)) fail(file, "param_dtype", "f32, bf16 or f16", m.param_dtype);
  if (!m.config || typeof m.config !== "object") fail(file, "config", "an object", m.config);
  if (!m.loss_scaler || typeof m.loss_scaler !== "object") fail(file, "loss_scaler", "an object", m.loss_scaler);
  const rng = m.rng as Record<string, unknown> | undefined;
  if (!rng || rng.kind !== "counter") fail(file, "rng", `{kind: "counter", seed, step}`, rng);
  uint(file, "rng.step", rng.step);
  if (!Array.isArray(m.files)) fail(file, "files", "an array", m.files);
  const files = m.files as CheckpointManifest["files"];
  if (files.length !== W) fail(file, "files", `${W} entries (world_size)`, files.length);
  files.forEach((f, i) => {
    if (!f || f.rank !== i || f.file !== rankFileName(i)) fail(file, `files[${i}]`, `{rank: ${i}, file: "${rankFileName(i)}"}`, f);
  });
  if (!Array.isArray(m.units)) fail(file, "units", "an array", m.units);
  const names = new Set<string>();
  (m.units as ManifestUnit[]).forEach((u, i) => {
    const at = `units[${i}]`;
    if (!u || typeof u !== "object" || typeof u.name !== "string") fail(file, `${at}.name`, "a string", u?.name);
    if (names.has(u.name)) fail(file, `${at}.name`, "a unique unit name", u.name);
    names.add(u.name);
    if (!["f32", "bf16", "f16"].includes(u.dtype)) fail(file, `${at}.dtype`, "f32, bf16 or f16", u.dtype);
    const numel = uint(file, `${at}.numel`, u.numel);
    if (!Array.isArray(u.states) || !u.states.every((s) => UNIT_STATE_NAMES.includes(s))) fail(file, `${at}.states`, "a list of params/master/m/v", u.states);
    if (!Array.isArray(u.params)) fail(file, `${at}.params`, "an array", u.params);
    for (const [j, p] of u.params.entries()) {
      if (!p || typeof p.name !== "string" || !Array.isArray(p.shape) || !p.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) fail(file, `${at}.params[${j}]`, "{name, shape, offset}", p);
      const n = p.shape.reduce((a, b) => a * b, 1);
      const off = uint(file, `${at}.params[${j}].offset`, p.offset);
      if (off + n > numel) fail(file, `${at}.params[${j}]`, `a range inside the unit's ${numel} elements`, { offset: off, numel: n });
    }
    if (!Array.isArray(u.pieces)) fail(file, `${at}.pieces`, "an array", u.pieces);
    let next = 0;
    for (const [j, p] of u.pieces.entries()) {
      const r = uint(file, `${at}.pieces[${j}].rank`, p?.rank);
      if (r >= W) fail(file, `${at}.pieces[${j}].rank`, `a rank below world_size ${W}`, r);
      if (uint(file, `${at}.pieces[${j}].start`, p.start) !== next) fail(file, `${at}.pieces[${j}].start`, `${next} (pieces must tile the unit)`, p.start);
      next += uint(file, `${at}.pieces[${j}].count`, p.count);
    }
    if (next !== numel) fail(file, `${at}.pieces`, `ranges covering [0, ${numel})`, `[0, ${next})`);
  });
  return m as unknown as CheckpointManifest;
}

/** Tag names under `dir` that hold a manifest, oldest first (by the manifest's global_steps, then
 * modification time). Unreadable tags are skipped. */
export function listTags(dir: string, entries: readonly string[]): { tag: string; steps: number; mtime: number }[] {
  const out: { tag: string; steps: number; mtime: number }[] = [];
  for (const e of entries) {
    if (e === "latest" || e.endsWith(".tmp") || e.startsWith(".")) continue;
    const mf = join(dir, e, "manifest.json");
    if (!existsSync(mf)) continue;
    try {
      const st = statSync(mf);
      const steps = (JSON.parse(readFileSync(mf, "utf8")) as { global_steps?: number }).global_steps ?? 0;
      out.push({ tag: e, steps, mtime: st.mtimeMs });
    } catch {
      // a damaged tag is not counted (and not deleted) by keep_last
    }
  }
  return out.sort((a, b) => a.steps - b.steps || a.mtime - b.mtime);
}
