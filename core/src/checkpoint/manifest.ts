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
 * the step counters. It is read as untrusted input: size-limited, bounded before parsing (nesting
 * depth, string/key length, members: config/json-bounds.ts), and every field used is checked
 * (errors name the file and the field), restored scalars included (loss scale finite and
 * positive, counters consistent, scheduler and data position in range).
 *
 * Integrity (issue 18): the manifest ends with `manifest_sha256`, the SHA-256 of the file's own
 * text with those 64 hex digits replaced by zeros, so any edit is refused; and `files[r]` records
 * rank r's file size, record count and `index_sha256` (record-file.ts: the SHA-256 of the file's
 * index, which lists every frame's CRC-32, and the tag, rank and world size). {@link verifyRankFile}
 * checks a rank file against its entry, so a rank file copied in from another save is refused
 * before anything is loaded, naming the file and what disagrees.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { JobConfig } from "../config/types.ts";
import type { DataState } from "../data/loader.ts";
import type { LossScalerState } from "../optim/loss-scaler.ts";
import type { SchedulerState } from "../optim/schedulers.ts";
import { describeValue, scanJsonBounds, type JsonLimits } from "../config/json-bounds.ts";
import { findDuplicateJsonKey } from "../config/json-duplicate-keys.ts";
import { CheckpointError, writingFile } from "./errors.ts";
import type { RecordDType, RecordFileReader, RecordLayout } from "./record-file.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";
import { createHash } from "node:crypto";
import { sleepSync } from "@zeromoe/kernels/runtime";

/** `format` field of every manifest. */
export const MANIFEST_FORMAT = "zeromoe-checkpoint";
/** Manifest format version this code writes and reads (2: self-checksum and rank file digests). */
export const MANIFEST_VERSION = 2;
/** Largest manifest accepted (bytes). */
export const MAX_MANIFEST_BYTES = 256 << 20;
/** Bounds on the manifest's JSON before it is parsed. */
export const MANIFEST_JSON_LIMITS: Readonly<JsonLimits> = { maxDepth: 48, maxString: 1 << 20, maxKey: 1024, maxMembers: 1 << 24, maxText: MAX_MANIFEST_BYTES };
/** Largest loss scale accepted on restore (f32's range ends near 2^128). */
export const MAX_LOSS_SCALE = 2 ** 127;
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
  /** Written by format 1 manifests before issue 10 (the placement record of the MoE plugin); now
   * absent: the plugin keeps its entries under `plugins`. Ignored when present. */
  expert_placement?: unknown;
  /** Every entry the plugins contributed (`ctx.checkpoint.contribute(key, …)` in setup), by key;
   * given back to the same key's `restore` when a job resumes. */
  plugins: Record<string, unknown>;
  config: JobConfig;
  /** Training-stream position after the last saved step (core/src/data), or null. */
  data_position: DataState | null;
  /** All randomness is counter-based (Philox keyed by seed, step, rank, micro-batch): the seed and
   * the step counter are the whole RNG state. */
  rng: { kind: "counter"; seed: number; step: number };
  scheduler: SchedulerState | null;
  loss_scaler: LossScalerState;
  /** One entry per rank file: its size in bytes, record count and index digest (module comment). */
  files: ManifestFile[];
  /** Anything the caller passed as client state (JSON). */
  client_state: unknown;
}

/** A rank file as the manifest records it. */
export interface ManifestFile {
  rank: number;
  file: string;
  /** File size in bytes. */
  bytes: number;
  records: number;
  /** SHA-256 (hex) of the file's index (RecordFileReader.indexDigest). */
  index_sha256: string;
}

/** The manifest entry of an open rank file (save.ts, rank 0). */
export function manifestFileEntry(rank: number, r: RecordFileReader): ManifestFile {
  return { rank, file: rankFileName(rank), bytes: r.fileBytes, records: r.records.length, index_sha256: r.indexDigest };
}

/**
 * Check an open rank file against the manifest: its rank, tag and world size (from its index),
 * size, record count and index digest.
 * @throws CheckpointError naming the rank file and the first field that disagrees.
 */
export function verifyRankFile(m: CheckpointManifest, rank: number, r: RecordFileReader): void {
  const f = m.files[rank]!;
  const other = " (a rank file from another save, or a damaged one)";
  if (r.rank !== rank) throw new CheckpointError(r.path, `header says rank ${r.rank}, the manifest lists it as rank ${rank}${other}`);
  if (r.tag !== m.tag) throw new CheckpointError(r.path, `belongs to checkpoint tag ${describeValue(r.tag)}, the manifest's tag is ${quoteUntrusted(m.tag)}${other}`);
  if (r.worldSize !== m.world_size) throw new CheckpointError(r.path, `was written by a job of world size ${describeValue(r.worldSize)}, the manifest's world_size is ${m.world_size}${other}`);
  if (r.fileBytes !== f.bytes) throw new CheckpointError(r.path, `is ${r.fileBytes} bytes, the manifest records ${f.bytes}${other}`);
  if (r.records.length !== f.records) throw new CheckpointError(r.path, `holds ${r.records.length} records, the manifest records ${f.records}${other}`);
  if (r.indexDigest !== f.index_sha256) throw new CheckpointError(r.path, `index digest ${r.indexDigest.slice(0, 16)}… differs from the manifest's ${f.index_sha256.slice(0, 16)}…${other}`);
  // the layout the rank file was written under (absent in files written before it was recorded)
  if (r.layout !== null) {
    const edited = " (the manifest was edited and re-signed, or the rank file is from another save)";
    const mf = join(r.path, "..", "manifest.json");
    if (r.layout.zero_stage !== m.zero_stage) throw new CheckpointError(mf, `field zero_stage is ${m.zero_stage}, but ${rankFileName(rank)} was written at ZeRO stage ${r.layout.zero_stage}${edited}`);
    if (r.layout.ep_size !== m.ep_size) throw new CheckpointError(mf, `field ep_size is ${m.ep_size}, but ${rankFileName(rank)} was written at ep_size ${r.layout.ep_size}${edited}`);
    const placement = placementDigest(m.plugins);
    if (r.layout.placement_sha256 !== placement) throw new CheckpointError(mf, `field plugins.moe.placement ${placement === null ? "is absent" : `has digest ${placement.slice(0, 16)}…`}, but ${rankFileName(rank)} was written with ${r.layout.placement_sha256 === null ? "none" : `placement digest ${r.layout.placement_sha256.slice(0, 16)}…`}${edited}`);
  }
}

/** SHA-256 (hex) of the JSON of a manifest's `plugins.moe.placement` (the expert placement), or
 * null when there is none. */
export function placementDigest(plugins: unknown): string | null {
  const p = (plugins as { moe?: { placement?: unknown } } | null | undefined)?.moe?.placement;
  if (p === undefined || p === null || typeof plugins !== "object") return null;
  return sha256Hex(JSON.stringify(p));
}

/** The layout to record in every rank file of a save (record-file.ts RecordLayout). */
export function saveLayout(zeroStage: number, epSize: number, plugins: Record<string, unknown>): RecordLayout {
  return { zero_stage: zeroStage, ep_size: epSize, placement_sha256: placementDigest(plugins) };
}

const ZERO_DIGEST = "0".repeat(64);
const CHECKSUM_AT_END = /"manifest_sha256": ?"([0-9a-f]{64})"\s*\}\s*$/;

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The text of `manifest.json` for `m`: indented JSON ending with `manifest_sha256` (the module
 * comment says what it covers). */
export function manifestText(m: CheckpointManifest): string {
  const { manifest_sha256: _, ...body } = m as CheckpointManifest & { manifest_sha256?: string };
  const text = JSON.stringify({ ...body, manifest_sha256: ZERO_DIGEST }, null, 1) + "\n";
  const at = text.lastIndexOf(ZERO_DIGEST);
  return text.slice(0, at) + sha256Hex(text) + text.slice(at + ZERO_DIGEST.length);
}

/** @throws CheckpointError when `text` (of `file`) lacks its checksum or does not match it. */
function verifyManifestChecksum(text: string, file: string): void {
  const m = CHECKSUM_AT_END.exec(text);
  if (!m) throw new CheckpointError(file, `has no manifest_sha256 at its end: written by another version, or edited (a manifest may not be edited by hand)`);
  const at = m.index + m[0].indexOf(m[1]!);
  const zeroed = text.slice(0, at) + ZERO_DIGEST + text.slice(at + 64);
  if (sha256Hex(zeroed) !== m[1]) throw new CheckpointError(file, `checksum mismatch (manifest_sha256): the file was edited or damaged after the save`);
}

/** File name of rank `r`'s records. */
export function rankFileName(rank: number): string {
  return `rank_${String(rank).padStart(5, "0")}.zmck`;
}

/** Tags are single path components of letters, digits, `.`, `_`, `-` (not starting with a dot). */
export function checkTag(tag: string, where: string): void {
  if (typeof tag !== "string" || !/^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$/.test(tag) || tag.endsWith(".tmp")) {
    throw new CheckpointError(where, `invalid tag ${describeValue(tag)}: expected letters, digits, ".", "_" or "-" (not starting with "." nor ending with ".tmp")`);
  }
}

/** Write `text` to `path` through `path.tmp` + fsync + rename (atomic on POSIX).
 * @throws CheckpointWriteError naming the file for a system error (disk full, …). */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  const fd = writingFile(tmp, "create", () => openSync(tmp, "w"));
  try {
    writingFile(tmp, "write", () => {
      const b = Buffer.from(text);
      let done = 0;
      while (done < b.length) done += writeSync(fd, b, done, b.length - done);
      fsyncSync(fd);
    });
  } finally {
    closeSync(fd);
  }
  writingFile(path, `rename ${tmp} to it`, () => renameSync(tmp, path));
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

/** What a path that is not a regular file is, for messages: checked before reading, because
 * reading a directory fails with EISDIR and opening a FIFO blocks until a writer comes. */
export function fileKind(st: { isDirectory(): boolean; isFIFO(): boolean }): string {
  return st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket";
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
    if (!st.isFile()) throw new CheckpointError(latest, `is not a regular file (${fileKind(st)}); expected a file holding the newest tag's name`);
    if (st.size > 4096) throw new CheckpointError(latest, `is ${st.size} bytes; expected a tag name`);
    t = readFileSync(latest, "utf8").trim();
  }
  checkTag(t, join(path, "latest"));
  const tagDir = join(path, t);
  if (!existsSync(join(tagDir, "manifest.json"))) {
    // `latest` is written only after a save is complete, so a tag it names without a manifest was
    // removed after `latest` was read: pruned by keep_last once a newer save moved `latest` on
    // (a zero-to-fp32 beside a running job reported "has no manifest.json", which reads like damage)
    const now = tag === undefined ? latestMovedOn(path, t, PRUNE_RACE_WAIT_MS) : null;
    if (now !== null) throw new CheckpointError(tagDir, `tag ${quoteUntrusted(t)} that "latest" named was removed while it was being located (pruned by checkpoint.keep_last of a job saving into ${pathForMessage(path)}?); the newest tag is now ${quoteUntrusted(now)}: run again to read it`);
    throw new CheckpointError(tagDir, "has no manifest.json (missing tag or an interrupted save)");
  }
  return { dir: path, tag: t, tagDir };
}

/** Longest wait for a race with a saving job to show (`latest` moved on, the old tag removed), ms. */
export const PRUNE_RACE_WAIT_MS = 1000;

/** The tag `dir/latest` names now when it is no longer `tag` (read again for up to `waitMs`),
 * else null. An unreadable or invalid `latest` counts as not moved on. */
function latestMovedOn(dir: string, tag: string, waitMs: number): string | null {
  const latest = join(dir, "latest");
  for (let waited = 0; ; waited += 50) {
    try {
      const st = statSync(latest);
      if (st.isFile() && st.size <= 4096) {
        const t = readFileSync(latest, "utf8").trim();
        if (t !== tag && /^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$/.test(t)) return t;
      }
    } catch {
      // gone or unreadable: not a sign of a newer save
    }
    if (waited >= waitMs) return null;
    sleepSync(50);
  }
}

/**
 * Whether the located tag `loc` was removed by a saving job's `checkpoint.keep_last` pruning while
 * it was being read (a file of it went missing: manifest.json or a rank file). Pruned means its
 * manifest.json is gone — now, or within {@link PRUNE_RACE_WAIT_MS} when `latest` already names
 * another tag (pruning removes a tag's files one by one, rank files possibly first). A tag that is
 * still `latest`, or keeps its manifest, is damaged instead.
 * @returns null when not pruned, else the newest tag `latest` names now ("" when unreadable).
 */
export function prunedWhileRead(loc: CheckpointLocation): string | null {
  const manifest = join(loc.tagDir, "manifest.json");
  const newest = (): string => {
    try {
      return locateCheckpoint(loc.dir).tag;
    } catch {
      return "";
    }
  };
  if (!existsSync(manifest)) return newest();
  // a save renames `latest` before it prunes: a tag still named by it is damaged, not pruned
  if (latestMovedOn(loc.dir, loc.tag, 0) === null) return null;
  for (let waited = 0; waited < PRUNE_RACE_WAIT_MS; waited += 50) {
    sleepSync(50);
    if (!existsSync(manifest)) return newest();
  }
  return null;
}

/** The CheckpointError of a tag {@link prunedWhileRead} found pruned, naming the newest tag. */
export function prunedTagError(loc: CheckpointLocation, newest: string): CheckpointError {
  const now = newest !== "" && newest !== loc.tag ? `; the newest tag is now ${quoteUntrusted(newest)}: run again to read it` : "";
  return new CheckpointError(loc.tagDir, `tag ${quoteUntrusted(loc.tag)} was removed while it was being read (pruned by checkpoint.keep_last of a job saving into ${pathForMessage(loc.dir)}?)${now}`);
}

function fail(file: string, field: string, expected: string, got: unknown): never {
  throw new CheckpointError(file, `field ${field}: expected ${expected}, got ${describeValue(got)}`);
}

function int(file: string, field: string, v: unknown, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) fail(file, field, `an integer in [${min}, ${max}]`, v);
  return v;
}

/** Range checks of the state restored as scalars (issue 18: a scale of 1e999 was accepted). */
function checkRestoredScalars(file: string, m: Record<string, unknown>): void {
  const steps = m.global_steps as number;
  if ((m.applied_steps as number) > steps) fail(file, "applied_steps", `at most global_steps (${steps})`, m.applied_steps);
  const rng = m.rng as Record<string, unknown>;
  int(file, "rng.seed", rng.seed, 0, 2 ** 32 - 1);
  if (rng.step !== steps) fail(file, "rng.step", `global_steps (${steps})`, rng.step);
  const ls = m.loss_scaler as Record<string, unknown>;
  if (typeof ls.cur_scale !== "number" || !Number.isFinite(ls.cur_scale) || !(ls.cur_scale > 0) || ls.cur_scale > MAX_LOSS_SCALE) fail(file, "loss_scaler.cur_scale", `a finite number in (0, 2^127]`, ls.cur_scale);
  int(file, "loss_scaler.cur_iter", ls.cur_iter, 0, steps);
  int(file, "loss_scaler.last_overflow_iter", ls.last_overflow_iter, -1, steps);
  int(file, "loss_scaler.cur_hysteresis", ls.cur_hysteresis, 0, 1 << 20);
  int(file, "loss_scaler.overflow_count", ls.overflow_count, 0, steps);
  if (m.scheduler !== null) {
    const sc = m.scheduler as Record<string, unknown> | undefined;
    if (!sc || typeof sc !== "object") fail(file, "scheduler", "null or {last_batch_iteration}", sc);
    int(file, "scheduler.last_batch_iteration", sc.last_batch_iteration, -1, steps);
  }
  if (m.data_position !== null) {
    const d = m.data_position as Record<string, unknown> | undefined;
    if (!d || typeof d !== "object") fail(file, "data_position", "null or {epoch, index, micro}", d);
    int(file, "data_position.epoch", d.epoch, 0, Number.MAX_SAFE_INTEGER);
    int(file, "data_position.index", d.index, 0, Number.MAX_SAFE_INTEGER);
    int(file, "data_position.micro", d.micro, 0, Number.MAX_SAFE_INTEGER);
  }
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
  const st = statSync(file);
  if (!st.isFile()) throw new CheckpointError(file, `is not a regular file (${fileKind(st)}); expected the checkpoint's manifest`);
  const size = st.size;
  if (size > MAX_MANIFEST_BYTES) throw new CheckpointError(file, `is ${size} bytes, over the ${MAX_MANIFEST_BYTES}-byte limit`);
  const text = readFileSync(file, "utf8");
  const over = scanJsonBounds(text, MANIFEST_JSON_LIMITS);
  if (over !== null) throw new CheckpointError(file, `${over.path === "" ? "" : `at ${over.path}: `}${over.message}`);
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(file, `is not valid JSON: ${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)}`);
  }
  if (!m || typeof m !== "object" || Array.isArray(m)) throw new CheckpointError(file, "is not a JSON object");
  if (m.format_version === 1) throw new CheckpointError(file, `format_version 1 (a checkpoint without integrity fields, written before this version); resume it with the version that wrote it, or export it with zero-to-fp32 and use --init-from`);
  verifyManifestChecksum(text, file);
  const dup = findDuplicateJsonKey(text);
  if (dup !== null) throw new CheckpointError(file, `key ${describeValue(dup.key)} is given twice${dup.path === "" ? "" : ` in ${dup.path}`} (readers disagree on which one wins)`);
  if (m.format !== MANIFEST_FORMAT) fail(file, "format", JSON.stringify(MANIFEST_FORMAT), m.format);
  if (m.format_version !== MANIFEST_VERSION) fail(file, "format_version", String(MANIFEST_VERSION), m.format_version);
  const W = uint(file, "world_size", m.world_size, 1);
  uint(file, "zero_stage", m.zero_stage);
  uint(file, "ep_size", m.ep_size, 1);
  if (typeof m.tag !== "string" || !/^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$/.test(m.tag)) fail(file, "tag", "a tag name", m.tag);
  int(file, "global_steps", m.global_steps, 0, 2 ** 40);
  int(file, "applied_steps", m.applied_steps, 0, 2 ** 40);
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
    if (!f || typeof f !== "object" || f.rank !== i || f.file !== rankFileName(i)) fail(file, `files[${i}]`, `{rank: ${i}, file: "${rankFileName(i)}", …}`, f);
    uint(file, `files[${i}].bytes`, f.bytes);
    uint(file, `files[${i}].records`, f.records);
    if (typeof f.index_sha256 !== "string" || !/^[0-9a-f]{64}$/.test(f.index_sha256)) fail(file, `files[${i}].index_sha256`, "64 hex digits", f.index_sha256);
  });
  // every model has units (embed, layers, head): an empty plan would export or load nothing
  if (!Array.isArray(m.units) || m.units.length === 0) fail(file, "units", "a non-empty array", Array.isArray(m.units) ? "[]" : m.units);
  const names = new Set<string>();
  const paramNames = new Set<string>();
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
      // a parameter name is a tensor name of the export: one unit, one place
      if (paramNames.has(p.name)) fail(file, `${at}.params[${j}].name`, "a parameter name not used before in the plan", p.name);
      paramNames.add(p.name);
      if (p.shape.length > 8) fail(file, `${at}.params[${j}].shape`, "at most 8 dimensions", p.shape);
      const n = p.shape.reduce((a, b) => a * b, 1);
      if (!Number.isSafeInteger(n)) fail(file, `${at}.params[${j}].shape`, "an element count below 2^53", p.shape);
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
  checkRestoredScalars(file, m);
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
      if (st.size > MAX_MANIFEST_BYTES) continue;
      const text = readFileSync(mf, "utf8");
      if (scanJsonBounds(text, MANIFEST_JSON_LIMITS) !== null) continue;
      const gs = (JSON.parse(text) as { global_steps?: unknown }).global_steps;
      const steps = typeof gs === "number" && Number.isFinite(gs) ? gs : 0;
      out.push({ tag: e, steps, mtime: st.mtimeMs });
    } catch {
      // a damaged tag is not counted (and not deleted) by keep_last
    }
  }
  return out.sort((a, b) => a.steps - b.steps || a.mtime - b.mtime);
}
