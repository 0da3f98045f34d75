/**
 * Runner of the decoder fuzz (decoder-fuzz.test.ts spawns it once per reader, under a virtual
 * memory limit, so that a regression allocating gigabytes fails the test instead of taking the
 * machine's memory): `bun core/test/checkpoint/fuzz-runner.ts <reader>` prints one JSON line
 * {reader, ok, errors, deep, peakMiB} and exits 0, or prints the first unclean case and exits 1.
 *
 * Decoder fuzz (issue 18): at least 10,000 mutated inputs per reader of untrusted bytes — rank
 * files, manifest.json, safetensors, job + DeepSpeed JSON, command-line arguments — with the
 * checksums RECOMPUTED after each mutation (frame CRCs, index CRC and trailer; the manifest's
 * manifest_sha256; the safetensors header length), so that mutations reach the decoders and
 * validators instead of stopping at a checksum. Mutations are byte-level (flips, fills, cuts,
 * insertions) and value-level (a decoded node replaced by a hostile value: BigInt, NaN, 1e999,
 * huge counts, deep nesting, long keys, wrong types; keys deleted or renamed).
 *
 * Every case must end in success or in the reader's own error type (CheckpointError,
 * SafetensorsError, ConfigError, UsageError): any other exception fails the test at once, naming
 * the seed and case. Peak resident memory growth must stay under 256 MiB. No case is timed (a hang
 * is caught by the test timeout, a generous guard). The seed is fixed; a larger run on demand:
 * `ZEROMOE_FUZZ_CASES=100000 ZEROMOE_FUZZ_SEED=7 bun test core/test/checkpoint/decoder-fuzz.test.ts`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decode as cborDecode, encode as cborEncode } from "cbor-x";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { decodeTensor } from "../../src/checkpoint/hf-load.ts";
import { readManifest } from "../../src/checkpoint/manifest.ts";
import { crc32, RecordFileReader, RecordFileWriter } from "../../src/checkpoint/record-file.ts";
import { SafetensorsError, SafetensorsReader, writeSafetensors } from "../../src/checkpoint/safetensors.ts";
import { ShardSource } from "../../src/checkpoint/shard-source.ts";
import { parseTrainArgs, UsageError } from "../../src/cli/args.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { parseJsonConfig, resolveJobConfig } from "../../src/config/resolve.ts";
import { summarizeJob } from "../../src/config/summary.ts";
import { launch } from "../../src/launch/index.ts";
import { tinyJob } from "../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "./fixture.ts";
import { FUZZ_CASES, FUZZ_SEED, mutateBytes, mutateTree, PeakMemory, pick, rng, spliceJson } from "./fuzz-kit.ts";

export const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-decoder-fuzz-"));
const MIB = 1 << 20;

/** What one reader's run found (printed as JSON by the runner). */
export interface Tally {
  ok: number;
  errors: number;
  /** Errors other than a checksum mismatch: the mutation reached a decoder or validator. */
  deep: number;
  peakMiB: number;
}

/** Run `cases` cases; `one(c, r)` builds and reads one mutated input. */
function fuzz(name: string, seed: number, cases: number, one: (r: () => number) => void, isClean: (e: unknown) => boolean): Tally {
  const r = rng(seed);
  Bun.gc(true);
  const mem = new PeakMemory();
  const t: Tally = { ok: 0, errors: 0, deep: 0, peakMiB: 0 };
  for (let c = 0; c < cases; c++) {
    try {
      one(r);
      t.ok++;
    } catch (e) {
      if (!isClean(e)) throw new Error(`${name}: case ${c} (seed ${seed}) ended in ${(e as Error)?.name ?? typeof e}, not a clean error: ${(e as Error)?.stack ?? String(e)}`);
      t.errors++;
      if (!/checksum mismatch/.test((e as Error).message)) t.deep++;
    }
    if (c % 5 === 0) mem.sample();
    // collect the cases' garbage now and then, so the figure is what one case holds, not how far
    // the collector lets garbage pile up
    if (c % 50 === 49) Bun.gc(true);
  }
  mem.sample();
  t.peakMiB = mem.peak / MIB;
  return t;
}

export function randomF32(n: number, r: () => number): Uint8Array {
  return new Uint8Array(Float32Array.from({ length: n }, () => (r() - 0.5) * 3).buffer);
}

// ---------------------------------------------------------------------------------------------
// rank files

export interface RankParts {
  head: Uint8Array;
  frames: Uint8Array[];
  index: Record<string, unknown>;
}

export function splitRankFile(bytes: Uint8Array): RankParts {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const off = Number(dv.getBigUint64(bytes.length - 24, true));
  const len = dv.getUint32(bytes.length - 16, true);
  const index = cborDecode(bytes.subarray(off, off + len)) as Record<string, unknown>;
  const frames = (index.records as { offset: number; bytes: number }[]).map((e) => bytes.slice(e.offset, e.offset + e.bytes));
  return { head: bytes.slice(0, 16), frames, index };
}

/** Lay out header, frames, index and trailer, recomputing every frame's offset/size/CRC in the
 * index (where the entry is still an object) unless `keepIndex`, and the trailer's offset, size
 * and CRC of the index bytes. */
function joinRankFile(p: RankParts, indexBytes?: Uint8Array, keepIndex = false): Uint8Array {
  let pos = p.head.length;
  const recs = p.index.records;
  p.frames.forEach((f, i) => {
    const e = Array.isArray(recs) ? (recs[i] as Record<string, unknown> | undefined) : undefined;
    if (!keepIndex && e && typeof e === "object" && !Array.isArray(e)) {
      e.offset = pos;
      e.bytes = f.length;
      e.crc = crc32(f);
    }
    pos += f.length;
  });
  const idx = indexBytes ?? (cborEncode(p.index) as Uint8Array);
  const out = new Uint8Array(pos + idx.length + 24);
  out.set(p.head, 0);
  let at = p.head.length;
  for (const f of p.frames) {
    out.set(f, at);
    at += f.length;
  }
  out.set(idx, at);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(at + idx.length, BigInt(at), true);
  dv.setUint32(at + idx.length + 8, idx.length, true);
  dv.setUint32(at + idx.length + 12, crc32(idx), true);
  out.set(new TextEncoder().encode("ZMCKEND\0"), at + idx.length + 16);
  return out;
}

const clone = <T,>(v: T): T => cborDecode(cborEncode(v) as Uint8Array) as T;

/** One mutated rank file with consistent checksums (see the module comment). */
export function mutateRankFile(orig: RankParts, r: () => number): Uint8Array {
  const p: RankParts = { head: orig.head.slice(), frames: orig.frames.map((f) => f.slice()), index: clone(orig.index) };
  const i = pick(r, p.frames.length);
  switch (pick(r, 7)) {
    case 0: {
      // a frame's decoded fields
      const f = cborDecode(p.frames[i]!) as Record<string, unknown>;
      mutateTree(f, r, true);
      p.frames[i] = cborEncode(f) as Uint8Array;
      return joinRankFile(p);
    }
    case 1:
      // a frame's bytes
      p.frames[i] = mutateBytes(p.frames[i]!, r);
      return joinRankFile(p);
    case 2: {
      // the same field of a frame and its index entry (passes the frame ↔ index comparison)
      const f = cborDecode(p.frames[i]!) as Record<string, unknown>;
      const e = (p.index.records as Record<string, unknown>[])[i]!;
      const k = ["start", "count", "raw_bytes", "dtype", "codec", "name"][pick(r, 6)]!;
      const v = [0, 1, 7, 2 ** 20, 2 ** 26, 2 ** 30, 2 ** 53, -3, "f16", "bf16", "u32", "raw", "deflate", "shuffle", "layers.0/m/0", 5n][pick(r, 16)];
      f[k] = v;
      e[k] = v;
      if (pick(r, 2) === 0 && f.data instanceof Uint8Array) f.data = mutateBytes(f.data, r);
      p.frames[i] = cborEncode(f) as Uint8Array;
      return joinRankFile(p);
    }
    case 3: {
      // the index's decoded values (after the layout fix-up, so mutated offsets survive)
      joinRankFile(p);
      mutateTree(p.index, r, true);
      return joinRankFile(p, undefined, true);
    }
    case 4: {
      // the index's bytes
      joinRankFile(p);
      return joinRankFile(p, mutateBytes(cborEncode(p.index) as Uint8Array, r), true);
    }
    case 5: {
      // the header (rank, version, magic)
      const h = mutateBytes(p.head, r).slice(0, 16);
      p.head = h.length === 16 ? h : p.head;
      if (h.length === 16) p.index.rank = new DataView(h.buffer).getUint32(12, true);
      return joinRankFile(p);
    }
    default:
      // the whole file, checksums left as they are
      return mutateBytes(joinRankFile(p), r);
  }
}

// ---------------------------------------------------------------------------------------------
// manifest

/** Re-sign manifest text by the documented rule (independent of manifest.ts). */
export function resign(text: string): string {
  const zero = text.replace(/("manifest_sha256": ?")[0-9a-f]{64}"/, `$1${"0".repeat(64)}"`);
  const digest = new Bun.CryptoHasher("sha256").update(zero).digest("hex");
  return zero.replace(/("manifest_sha256": ?")0{64}"/, `$1${digest}"`);
}

export function mutateManifest(original: string, r: () => number): string {
  if (pick(r, 4) === 0) return resign(new TextDecoder().decode(mutateBytes(new TextEncoder().encode(original), r)));
  const m = JSON.parse(original) as Record<string, unknown>;
  delete m.manifest_sha256;
  mutateTree(m, r, false);
  const text = JSON.stringify({ ...m, manifest_sha256: "0".repeat(64) }, null, 1) + "\n";
  return resign(spliceJson(text, r));
}

// ---------------------------------------------------------------------------------------------
// safetensors

function frameSafetensors(header: Uint8Array, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + header.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(header.length), true);
  out.set(header, 8);
  out.set(data, 8 + header.length);
  return out;
}

export function mutateSafetensors(file: Uint8Array, r: () => number): Uint8Array {
  const n = Number(new DataView(file.buffer, file.byteOffset).getBigUint64(0, true));
  const header = file.subarray(8, 8 + n);
  const data = file.subarray(8 + n);
  switch (pick(r, 4)) {
    case 0:
      return frameSafetensors(mutateBytes(header, r), data);
    case 1:
      return mutateBytes(file, r);
    default: {
      const h = JSON.parse(new TextDecoder().decode(header)) as Record<string, unknown>;
      mutateTree(h, r, false);
      return frameSafetensors(new TextEncoder().encode(spliceJson(JSON.stringify(h), r)), pick(r, 4) === 0 ? mutateBytes(data, r) : data);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// job + DeepSpeed JSON, command line

export const JOB_TEXT = JSON.stringify({
  ...tinyJob({ world_size: 2, steps: 5 }),
  checkpoint: { dir: "ck", save_interval: 2, keep_last: 1 },
  scheduler: { type: "WarmupLR", params: { warmup_num_steps: 2 } },
  zero_optimization: { stage: 1, reduce_bucket_size: 1000 },
});
export const DS_TEXT = JSON.stringify({ zero_optimization: { stage: 2, overlap_comm: true }, gradient_clipping: 1.0, fp16: { enabled: false }, optimizer: { type: "AdamW", params: { lr: 3e-4 } } });

export function mutateJson(text: string, r: () => number): string {
  if (pick(r, 3) === 0) return new TextDecoder().decode(mutateBytes(new TextEncoder().encode(text), r));
  const v = JSON.parse(text) as Record<string, unknown>;
  mutateTree(v, r, false);
  return spliceJson(JSON.stringify(v), r);
}

/** The same deep object under the same key in the job and the DeepSpeed file (deepMerge). */
export function sharedDeep(r: () => number): [string, string] {
  const depth = [10, 30, 33, 1000][pick(r, 4)]!;
  const deep = '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
  const job = JSON.parse(JOB_TEXT) as Record<string, unknown>;
  const ds = JSON.parse(DS_TEXT) as Record<string, unknown>;
  (job.zero_optimization as Record<string, unknown>).x = "\u0001";
  (ds.zero_optimization as Record<string, unknown>).x = "\u0001";
  const put = (s: string) => s.replace(JSON.stringify("\u0001"), deep);
  return [put(JSON.stringify(job)), put(JSON.stringify(ds))];
}

const OPTION_NAMES = ["--config", "--deepspeed", "--steps", "--world-size", "--seed", "--backend", "--summary", "--resume", "--init-from", "-h", "--help", "--launcher", "--hostfile", "-x", "--", "-"];
function randomArgv(r: () => number): string[] {
  const n = pick(r, 10) === 0 ? 60 + pick(r, 20) : 1 + pick(r, 8);
  const argv: string[] = [];
  for (let i = 0; i < n; i++) {
    const k = pick(r, 6);
    if (k <= 1) argv.push(OPTION_NAMES[pick(r, OPTION_NAMES.length)]!);
    else if (k === 2) {
      const o = OPTION_NAMES[pick(r, OPTION_NAMES.length)]!;
      argv.push(new TextDecoder().decode(mutateBytes(new TextEncoder().encode(o), r)));
    } else if (k === 3) argv.push(`${OPTION_NAMES[pick(r, 10)]!}=${["1", "-1", "0", "1e3", "cpu", "", "x".repeat(pick(r, 9000))][pick(r, 7)]}`);
    else argv.push(["1", "-7", "0", "2147483648", "abc", "", "-", "é", "9".repeat(1 + pick(r, 40)), "p".repeat(pick(r, 12000))][pick(r, 10)]!);
  }
  return argv;
}

/** The rankFiles reader's run. */
function rankFiles(): Tally {
  const r = rng(FUZZ_SEED);
  const f = join(ROOT, "orig.zmck");
  const w = RecordFileWriter.create(f, 1, { tag: "global_step3", worldSize: 2 });
  w.add("embed/params/0", "f32", 0, 1, randomF32(1, r));
  w.add("embed/m/0", "f32", 0, 97, randomF32(97, r));
  w.add("layers.0/params/0", "bf16", 0, 31, new Uint8Array(62).map(() => pick(r, 256)));
  w.add("layers.0/v/0", "f32", 0, 257, new Uint8Array(257 * 4)); // compressible
  w.finish(1);
  const f2 = join(ROOT, "deflate.zmck");
  const w2 = RecordFileWriter.create(f2, 0, { codec: "deflate", tag: "t", worldSize: 1 });
  w2.add("layers.1/m/0", "f32", 0, 41, randomF32(41, r));
  w2.add("layers.1/params/0", "f16", 0, 3, new Uint8Array(6).map(() => pick(r, 256)));
  w2.finish(0);
  const f3 = join(ROOT, "raw.zmck");
  const w3 = RecordFileWriter.create(f3, 0, { codec: "raw", tag: "t", worldSize: 1 });
  w3.add("head/master/5", "f32", 5, 13, randomF32(13, r));
  w3.add("head/params/5", "i32", 5, 2, randomF32(2, r));
  w3.finish(0);
  const originals = [f, f2, f3].map((p) => splitRankFile(readFileSync(p)));
  const target = join(ROOT, "target.zmck");
  const t = fuzz("rank file", FUZZ_SEED + 1, FUZZ_CASES, (rr) => {
    writeFileSync(target, mutateRankFile(originals[pick(rr, 10) < 6 ? 0 : pick(rr, 3)]!, rr));
    const rd = RecordFileReader.open(target);
    try {
      rd.verifyAll();
    } finally {
      rd.close();
    }
  }, (e) => e instanceof CheckpointError);
  return t;
}

/** The manifest reader's run. */
async function manifest(): Promise<Tally> {
  const dir = join(ROOT, "ck");
  await launch<RunOut[]>({
    worldSize: 2, entry: CKPT_ENTRY, timeoutS: 120,
    args: { runs: [{ job: tinyJob({ model: { model_type: "llama", vocab_size: 256, hidden_size: 8, intermediate_size: 5, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 16 }, zero_optimization: { stage: 3 } }), ops: [{ op: "train", steps: 1 }, { op: "save", dir, tag: "t" }] }] },
  });
  const tagDir = join(dir, "t");
  const mf = join(tagDir, "manifest.json");
  // a fixed creation time, so the same seed gives the same cases on every run
  const original = resign(readFileSync(mf, "utf8").replace(/"created": "[^"]*"/, `"created": "2026-01-01T00:00:00.000Z"`));
  writeFileSync(mf, original);
  const read = () => {
    const m = readManifest(tagDir);
    const src = new ShardSource(tagDir, m);
    try {
      for (const u of m.units) for (const s of u.states) src.readF32(u.name, s, 0, u.numel);
    } finally {
      src.close();
    }
  };
  read(); // control: the intact checkpoint reads
  if (resign(original) !== original) throw new Error("the runner's signing rule differs from the manifest's");
  const t = fuzz("manifest", FUZZ_SEED + 2, FUZZ_CASES, (rr) => {
    writeFileSync(mf, mutateManifest(original, rr));
    read();
  }, (e) => e instanceof CheckpointError);
  writeFileSync(mf, original);
  return t;
}

/** The safetensors reader's run. */
function safetensors(): Tally {
  const r = rng(FUZZ_SEED + 3);
  const f = join(ROOT, "orig.safetensors");
  writeSafetensors(f, [
    { name: "a.weight", dtype: "F32", shape: [3, 7], data: new Float32Array(21).map(() => r()) },
    { name: "b.bias", dtype: "BF16", shape: [5], data: new Uint16Array(5).map(() => pick(r, 65536)) },
    { name: "c.ids", dtype: "I64", shape: [2, 2], data: new BigInt64Array([1n, -2n, 3n, 1n << 40n]) },
    { name: "d.empty", dtype: "F16", shape: [0, 4], data: new Uint16Array(0) },
  ], { format: "pt" });
  const original = readFileSync(f);
  const target = join(ROOT, "target.safetensors");
  const t = fuzz("safetensors", FUZZ_SEED + 4, FUZZ_CASES, (rr) => {
    writeFileSync(target, mutateSafetensors(original, rr));
    const rd = SafetensorsReader.open(target);
    try {
      for (const n of rd.names()) decodeTensor(rd.readTensorBytes(n), rd.info(n), target);
    } finally {
      rd.close();
    }
  }, (e) => e instanceof SafetensorsError);
  return t;
}

/** The jobConfig reader's run. */
function jobConfig(): Tally {
  const t = fuzz("job config", FUZZ_SEED + 5, FUZZ_CASES, (rr) => {
    let job = JOB_TEXT;
    let ds = DS_TEXT;
    const k = pick(rr, 10);
    if (k === 0) [job, ds] = sharedDeep(rr);
    else if (k < 6) job = mutateJson(job, rr);
    else if (k < 9) ds = mutateJson(ds, rr);
    else [job, ds] = [mutateJson(job, rr), mutateJson(ds, rr)];
    const raw = parseJsonConfig(job, "job.json");
    const dsRaw = parseJsonConfig(ds, "ds.json");
    const { config } = resolveJobConfig(raw, { source: "job.json", deepspeed: { raw: dsRaw, source: "ds.json" } });
    summarizeJob(config);
  }, (e) => e instanceof ConfigError);
  return t;
}

/** The arguments reader's run. */
function arguments_(): Tally {
  const t = fuzz("train arguments", FUZZ_SEED + 6, FUZZ_CASES, (rr) => void parseTrainArgs(randomArgv(rr)), (e) => e instanceof UsageError);
  return t;
}

const READERS: Record<string, () => Tally | Promise<Tally>> = { rankFiles, manifest, safetensors, jobConfig, arguments: arguments_ };

if (import.meta.main) {
  const name = process.argv[2] ?? "";
  const run = READERS[name];
  if (!run) {
    console.error(`usage: bun fuzz-runner.ts <${Object.keys(READERS).join("|")}>`);
    process.exit(2);
  }
  let code = 0;
  try {
    console.log(JSON.stringify({ reader: name, ...(await run()) }));
  } catch (e) {
    console.log(`FAILED ${(e as Error).stack ?? String(e)}`);
    code = 1;
  } finally {
    rmSync(ROOT, { recursive: true, force: true });
  }
  process.exit(code);
}
