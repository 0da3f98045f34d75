/**
 * Mutation fuzzing of the readers of untrusted files: thousands of random corruptions of a rank
 * file, a manifest and a safetensors file. Every case must end either in a clean, typed error
 * (CheckpointError / SafetensorsError) or — where the format has no checksum (safetensors data,
 * manifest values that stay consistent) — in a successful read; never another exception, a hang
 * or a huge allocation. Rank files carry a CRC per record and on the index, so there every
 * mutation that changes the bytes must be detected.
 *
 * Mutations (seeded, reproducible; the seed and case are printed on failure): bit flips, random
 * bytes, runs of 0x00/0xff/0x7f (lengths and offsets become huge or zero), truncation, appended
 * bytes, a deleted slice, a duplicated slice. No case is timed (a busy machine must not fail the
 * test; a hang is caught by the test timeout). decoder-fuzz.test.ts recomputes the checksums so
 * that mutations reach the decoders behind them.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { xorshift32 } from "@zeromoe/kernels/testing";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { decodeTensor } from "../../src/checkpoint/hf-load.ts";
import { locateCheckpoint, readManifest } from "../../src/checkpoint/manifest.ts";
import { RecordFileReader, RecordFileWriter } from "../../src/checkpoint/record-file.ts";
import { SafetensorsError, SafetensorsReader, writeSafetensors } from "../../src/checkpoint/safetensors.ts";
import { ShardSource } from "../../src/checkpoint/shard-source.ts";
import { launch } from "../../src/launch/index.ts";
import { tinyJob } from "../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "./fixture.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-fuzz-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const SEED = 20261129;

/** xorshift32 */
function rng(seed: number): () => number {
  const next = xorshift32(seed);
  return () => next() / 4294967296;
}

/** One random mutation of `src` (a new array) and its description. */
function mutate(src: Uint8Array, r: () => number): { out: Uint8Array; what: string } {
  const n = src.length;
  const at = Math.floor(r() * n);
  const kind = Math.floor(r() * 7);
  const out = new Uint8Array(src);
  switch (kind) {
    case 0: {
      const k = 1 + Math.floor(r() * 3);
      for (let i = 0; i < k; i++) out[Math.floor(r() * n)]! ^= 1 << Math.floor(r() * 8);
      return { out, what: `flip ${k} bit(s)` };
    }
    case 1:
      out[at] = Math.floor(r() * 256);
      return { out, what: `byte ${at} := random` };
    case 2: {
      const v = [0x00, 0xff, 0x7f][Math.floor(r() * 3)]!;
      const len = 1 + Math.floor(r() * 8);
      out.fill(v, at, Math.min(n, at + len));
      return { out, what: `fill ${len} bytes at ${at} with ${v}` };
    }
    case 3:
      return { out: src.slice(0, at), what: `truncate to ${at}` };
    case 4: {
      const extra = new Uint8Array(1 + Math.floor(r() * 64)).map(() => Math.floor(r() * 256));
      const o = new Uint8Array(n + extra.length);
      o.set(src);
      o.set(extra, n);
      return { out: o, what: `append ${extra.length} bytes` };
    }
    case 5: {
      const len = 1 + Math.floor(r() * Math.min(64, n - at));
      const o = new Uint8Array(n - len);
      o.set(src.subarray(0, at));
      o.set(src.subarray(at + len), at);
      return { out: o, what: `delete ${len} bytes at ${at}` };
    }
    default: {
      const len = 1 + Math.floor(r() * Math.min(64, n - at));
      const o = new Uint8Array(n + len);
      o.set(src.subarray(0, at + len));
      o.set(src.subarray(at, n), at + len);
      return { out: o, what: `duplicate ${len} bytes at ${at}` };
    }
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

interface Tally {
  errors: number;
  ok: number;
}

/** Run `cases` mutations of `original` written to `path`; `read` must succeed or throw `Clean`. */
function fuzz(name: string, original: Uint8Array, path: string, cases: number, seed: number, read: () => void, isClean: (e: unknown) => boolean, mustDetect: boolean): Tally {
  const r = rng(seed);
  const t: Tally = { errors: 0, ok: 0 };
  for (let c = 0; c < cases; c++) {
    const { out, what } = mutate(original, r);
    writeFileSync(path, out);
    try {
      read();
      if (mustDetect && !sameBytes(out, original)) throw new Error(`${name} case ${c} (seed ${seed}, ${what}): mutation went undetected`);
      t.ok++;
    } catch (e) {
      if (!isClean(e)) throw new Error(`${name} case ${c} (seed ${seed}, ${what}): not a clean error: ${(e as Error)?.stack ?? String(e)}`);
      t.errors++;
    }
  }
  return t;
}

function randomF32(n: number, r: () => number): Uint8Array {
  const a = Float32Array.from({ length: n }, () => (r() - 0.5) * 3);
  return new Uint8Array(a.buffer);
}

describe("mutation fuzz (clean errors only)", () => {
  test("rank record files (shuffle, raw and deflate codecs): 4000 mutations, every change detected", () => {
    const r = rng(SEED);
    const f = join(ROOT, "orig.zmck");
    const w = RecordFileWriter.create(f, 3);
    w.add("embed/params/0", "f32", 0, 1, randomF32(1, r));
    w.add("embed/m/0", "f32", 0, 97, randomF32(97, r));
    w.add("layers.0/params/0", "bf16", 0, 31, new Uint8Array(62).map(() => Math.floor(r() * 256)));
    w.add("layers.0/v/0", "f32", 0, 257, new Uint8Array(257 * 4)); // compressible
    w.finish(3);
    const raw = join(ROOT, "raw.zmck");
    const w2 = RecordFileWriter.create(raw, 0, { codec: "raw" });
    w2.add("head/master/5", "f32", 5, 13, randomF32(13, r));
    w2.finish(0);
    const defl = join(ROOT, "deflate.zmck");
    const w3 = RecordFileWriter.create(defl, 1, { codec: "deflate" });
    w3.add("layers.1/m/0", "f32", 0, 41, randomF32(41, r));
    w3.add("layers.1/params/0", "f16", 0, 3, new Uint8Array(6).map(() => Math.floor(r() * 256)));
    w3.finish(1);
    const mem0 = process.memoryUsage().rss;
    const target = join(ROOT, "target.zmck");
    const read = () => {
      const rd = RecordFileReader.open(target);
      try {
        rd.verifyAll();
      } finally {
        rd.close();
      }
    };
    const a = fuzz("rank file", readFileSync(f), target, 3000, SEED + 1, read, (e) => e instanceof CheckpointError, true);
    const b = fuzz("raw rank file", readFileSync(raw), target, 500, SEED + 2, read, (e) => e instanceof CheckpointError, true);
    const c = fuzz("deflate rank file", readFileSync(defl), target, 500, SEED + 6, read, (e) => e instanceof CheckpointError, true);
    expect(a.errors + b.errors + c.errors).toBeGreaterThan(3900);
    expect(process.memoryUsage().rss - mem0).toBeLessThan(256 << 20);
  }, 300_000);

  test("manifest.json: 1500 mutations of a real checkpoint's manifest, read through every record", async () => {
    const dir = join(ROOT, "ck");
    await launch<RunOut[]>({
      worldSize: 2, entry: CKPT_ENTRY, timeoutS: 60,
      args: { runs: [{ job: tinyJob({ model: { model_type: "llama", vocab_size: 256, hidden_size: 8, intermediate_size: 5, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 16 }, zero_optimization: { stage: 3 } }), ops: [{ op: "train", steps: 1 }, { op: "save", dir, tag: "t" }] }] },
    });
    const mf = join(dir, "t", "manifest.json");
    const original = readFileSync(mf);
    const backup = join(ROOT, "manifest.orig");
    cpSync(mf, backup);
    const read = () => {
      const loc = locateCheckpoint(dir);
      const m = readManifest(loc.tagDir);
      const src = new ShardSource(loc.tagDir, m);
      try {
        for (const u of m.units) for (const s of u.states) src.readF32(u.name, s, 0, u.numel);
      } finally {
        src.close();
      }
    };
    read(); // control
    const mem0 = process.memoryUsage().rss;
    const t = fuzz("manifest", original, mf, 1500, SEED + 3, read, (e) => e instanceof CheckpointError, false);
    expect(t.errors).toBeGreaterThan(750);
    expect(process.memoryUsage().rss - mem0).toBeLessThan(256 << 20);
  }, 300_000);

  test("safetensors: 3000 mutations, header damage always refused cleanly", () => {
    const r = rng(SEED + 4);
    const f = join(ROOT, "orig.safetensors");
    writeSafetensors(f, [
      { name: "a.weight", dtype: "F32", shape: [3, 7], data: new Float32Array(21).map(() => r()) },
      { name: "b.bias", dtype: "BF16", shape: [5], data: new Uint16Array(5).map(() => Math.floor(r() * 65536)) },
      { name: "c.ids", dtype: "I64", shape: [2, 2], data: new BigInt64Array([1n, -2n, 3n, 1n << 40n]) },
      { name: "d.empty", dtype: "F16", shape: [0, 4], data: new Uint16Array(0) },
    ], { format: "pt" });
    const target = join(ROOT, "target.safetensors");
    const read = () => {
      const rd = SafetensorsReader.open(target);
      try {
        for (const n of rd.names()) decodeTensor(rd.readTensorBytes(n), rd.info(n), target);
      } finally {
        rd.close();
      }
    };
    const mem0 = process.memoryUsage().rss;
    const t = fuzz("safetensors", readFileSync(f), target, 3000, SEED + 5, read, (e) => e instanceof SafetensorsError, false);
    expect(t.errors).toBeGreaterThan(1000);
    expect(process.memoryUsage().rss - mem0).toBeLessThan(256 << 20);
  }, 300_000);
});
