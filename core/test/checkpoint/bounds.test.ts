/**
 * Each reader bounds its work before doing it (issue 18's reproductions, one by one): a 10 MB
 * unknown key, a job and DeepSpeed file sharing a deep object, a 100,000-deep safetensors shape, a
 * rank-file index holding a BigInt, a crafted rank file announcing 256 MiB per record from a few
 * compressed bytes, a 10 MB command-line argument. Each ends in the reader's own error naming the
 * file (and key path or record), echoes at most a short prefix of hostile text, and allocates
 * nothing near the announced sizes. No wall-clock time is asserted.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { decode as cborDecode, encode as cborEncode } from "cbor-x";
import { deflateSync } from "fflate";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { crc32, MAX_DEFLATE_RATIO, RecordFileReader, RecordFileWriter } from "../../src/checkpoint/record-file.ts";
import { parseSafetensorsHeader, SafetensorsError } from "../../src/checkpoint/safetensors.ts";
import { parseTrainArgs, UsageError } from "../../src/cli/args.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { describeValue, scanJsonBounds, CONFIG_JSON_LIMITS } from "../../src/config/json-bounds.ts";
import { parseJsonConfig, resolveJobConfig } from "../../src/config/resolve.ts";
import { tinyJob } from "../engine/fixtures.ts";
import { thrown } from "./thrown.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-bounds-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
const TRAIN = resolve(import.meta.dir, "../../src/cli/train.ts");


describe("job and DeepSpeed JSON", () => {
  test("a 10 MB unknown key: ConfigError naming the file, the key echoed as a short prefix", () => {
    const text = `{"model": {}, "${"k".repeat(10 << 20)}": 1}`;
    const e = thrown(() => parseJsonConfig(text, "job.json"));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.message).toContain("[job.json]");
    expect(e.message).toMatch(/key "k{40}…" \(10485760 characters\) is longer than the 256-character limit/);
    expect(e.message.length).toBeLessThan(400);
  });

  test("the same deep object in the job and the DeepSpeed file: refused before deepMerge, path named", () => {
    const deep = '{"a":'.repeat(100_000) + "1" + "}".repeat(100_000);
    const job = `{"zero_optimization": {"x": ${deep}}}`;
    const e = thrown(() => parseJsonConfig(job, "job.json"));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.message).toMatch(/zero_optimization\.x\.a\.a.*: nesting deeper than 32 levels \[job\.json\]/);
    // at the limit, the merge and the validation run and report the unknown keys
    const ok = '{"a":'.repeat(20) + "1" + "}".repeat(20);
    const raw = parseJsonConfig(JSON.stringify({ ...tinyJob(), zero_optimization: { stage: 1, x: "\u0001" } }).replace('"\\u0001"', ok), "job.json");
    const ds = parseJsonConfig(`{"zero_optimization": {"x": ${ok}}}`, "ds.json");
    const e2 = thrown(() => resolveJobConfig(raw, { source: "job.json", deepspeed: { raw: ds, source: "ds.json" } }));
    expect(e2).toBeInstanceOf(ConfigError);
    expect(e2.message).toContain("zero_optimization.x");
  });

  test("a model of 2^31 layers or experts is refused before anything walks its layers (found by the decoder fuzz)", () => {
    for (const [k, v] of [["num_hidden_layers", 2 ** 31], ["num_local_experts", 2 ** 20]] as const) {
      const job = tinyJob();
      const e = thrown(() => resolveJobConfig({ ...job, model: { ...(job.model as object), [k]: v } }, { source: "job.json" }));
      expect(e).toBeInstanceOf(ConfigError);
      expect(e.message).toStartWith("invalid job job.json: 1 error\n");
      // past 2^31 − 1 the schema bound (core/src/config/spec-model.ts MODEL_BOUNDS) answers first; below it the engine's own maximum
      expect(e.message).toMatch(new RegExp(`model\\.${k}: (${v} is above the supported maximum \\d+|out of range: expected integer in \\[1, \\d+\\], got ${v})`));
    }
  });

  test("a deeply nested array value is bounded too (show() and messages never see it)", () => {
    const v = scanJsonBounds(`{"steps": ${"[".repeat(50)}1${"]".repeat(50)}}`, CONFIG_JSON_LIMITS);
    expect(v?.path).toBe("steps" + "[0]".repeat(31)); // the root object and 31 arrays: depth 32
    expect(v?.message).toBe("nesting deeper than 32 levels");
  });

  test("a key over the limit is reported at the path of the object that holds it, not its previous member's", () => {
    // before: "model.vocab.ab: key … is longer than …" for a long key after "ab" in model.vocab
    const v = scanJsonBounds(`{"model": {"vocab": {"ab": 1, "${"k".repeat(5000)}": 2}}}`, CONFIG_JSON_LIMITS);
    expect(v?.path).toBe("model.vocab");
    expect(v?.message).toStartWith(`key "${"k".repeat(40)}…" (5000 characters) is longer than the`);
    expect(scanJsonBounds(`{"${"k".repeat(5000)}": 2}`, CONFIG_JSON_LIMITS)?.path).toBe("");
  });

  test("describeValue renders BigInt, cycles and deep values in a bounded string", () => {
    const cyc: Record<string, unknown> = { a: 1 };
    cyc.self = cyc;
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(describeValue(5n ** 100n).length).toBeLessThan(80);
    expect(describeValue(cyc)).toBe('{"a": 1, "self": {…2 keys}}');
    expect(describeValue(deep)).toBe("[[…1 items]]");
    expect(describeValue("z".repeat(1 << 20)).length).toBeLessThan(80);
  });

  test("bun run train --config with a 100,000-deep value: exit 2, one line naming the file and path", () => {
    const file = join(ROOT, "deep.json");
    writeFileSync(file, `{"model": {"model_type": "llama", "x": ${"[".repeat(100_000)}${"]".repeat(100_000)}}}`);
    const r = Bun.spawnSync(["bun", TRAIN, "--config", file], { env: { ...process.env, CI: "1" } });
    const err = r.stderr.toString();
    expect(r.exitCode).toBe(2);
    expect(err).not.toMatch(/^\s+at /m);
    expect(err).toContain(`model.x[0][0]`);
    expect(err).toContain(`nesting deeper than 32 levels [${file}]`);
  }, 300_000);
});

describe("command-line arguments", () => {
  test("a 10 MB argument: UsageError with a short echo", () => {
    const e = thrown(() => parseTrainArgs(["--config", "x".repeat(10 << 20)]));
    expect(e).toBeInstanceOf(UsageError);
    expect(e.message).toMatch(/^argument "x{40}…" \(10485760 characters\) is longer than the 4096-character limit/);
  });

  test("too many arguments", () => {
    expect(thrown(() => parseTrainArgs(new Array(1000).fill("--steps")))).toBeInstanceOf(UsageError);
  });
});

describe("safetensors header", () => {
  test("a shape nested 100,000 deep: SafetensorsError, no recursion", () => {
    const text = `{"a":{"dtype":"F32","shape":${"[".repeat(100_000)}${"]".repeat(100_000)},"data_offsets":[0,0]}}`;
    const e = thrown(() => parseSafetensorsHeader(new TextEncoder().encode(text), 0, "m.safetensors"));
    expect(e).toBeInstanceOf(SafetensorsError);
    expect(e.message).toMatch(/m\.safetensors: header at a\.shape\[0\] is out of bounds: nesting deeper than 3 levels/);
  });

  test("a shape of 100,000 dimensions: refused before its numel is computed", () => {
    const text = `{"a":{"dtype":"F32","shape":[${new Array(100_000).fill(1).join(",")}],"data_offsets":[0,4]}}`;
    const e = thrown(() => parseSafetensorsHeader(new TextEncoder().encode(text), 4, "m.safetensors"));
    expect(e.message).toContain("shape has 100000 dimensions, more than 64");
  });
});

describe("rank files", () => {
  /** Rewrite the index of `file` through `edit` (CRC and trailer recomputed). */
  function editIndex(file: string, edit: (index: Record<string, unknown>) => void): void {
    const b = readFileSync(file);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const off = Number(dv.getBigUint64(b.length - 24, true));
    const len = dv.getUint32(b.length - 16, true);
    const index = cborDecode(b.subarray(off, off + len)) as Record<string, unknown>;
    edit(index);
    const idx = cborEncode(index) as Uint8Array;
    const out = new Uint8Array(off + idx.length + 24);
    out.set(b.subarray(0, off));
    out.set(idx, off);
    const o = new DataView(out.buffer);
    o.setBigUint64(off + idx.length, BigInt(off), true);
    o.setUint32(off + idx.length + 8, idx.length, true);
    o.setUint32(off + idx.length + 12, crc32(idx), true);
    out.set(b.subarray(b.length - 8), out.length - 8);
    writeFileSync(file, out);
  }

  function sample(name: string): string {
    const f = join(ROOT, name);
    const w = RecordFileWriter.create(f, 0, { tag: "t", worldSize: 1, codec: "deflate" });
    w.add("u/params/0", "f32", 0, 5, new Uint8Array(new Float32Array([1, -2, 3.5, 7, 0.25]).buffer));
    w.finish(0);
    return f;
  }

  test("a BigInt in the index: CheckpointError naming the record, not a JSON.stringify crash", () => {
    const f = sample("bigint.zmck");
    editIndex(f, (ix) => ((ix.records as Record<string, unknown>[])[0]!.dtype = 2n ** 70n));
    const e = thrown(() => RecordFileReader.open(f));
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toBe(`${f}: record "u/params/0": index entry has unknown dtype 1180591620717411303424n`);
  });

  test.each([
    [28, /index entry has a field that is not a non-negative integer in range/], // over the 64 MiB record limit
    [26, /index entry announces 67108864 decompressed bytes from a \d+-byte frame \(DEFLATE's ratio is at most 1032:1\)/],
  ])("8 records announcing 2^%i bytes each from a few compressed bytes: refused before inflating", (log2, want) => {
    const f = join(ROOT, `bomb${log2}.zmck`);
    const w = RecordFileWriter.create(f, 0, { tag: "t", worldSize: 1, codec: "raw" });
    const zeros = deflateSync(new Uint8Array(1 << 20)); // ~1 KB of DEFLATE for 1 MiB of zeros
    for (let i = 0; i < 8; i++) w.add(`u/m/${i}`, "u32", i, zeros.length >> 2, zeros.subarray(0, zeros.length & ~3));
    w.finish(0);
    // make every frame claim a deflate payload of 256 MiB (frame and index agree; CRCs recomputed)
    const b = readFileSync(f);
    const rd = RecordFileReader.open(f);
    const frames = rd.records.map((e) => {
      const fr = cborDecode(b.subarray(e.offset, e.offset + e.bytes)) as Record<string, unknown>;
      fr.codec = "deflate";
      fr.count = 2 ** (log2 - 2);
      fr.raw_bytes = 2 ** log2;
      return cborEncode(fr) as Uint8Array;
    });
    rd.close();
    let pos = 16;
    const recs = frames.map((fr, i) => {
      const r = { name: `u/m/${i}`, offset: pos, bytes: fr.length, crc: crc32(fr), dtype: "u32", start: i, count: 2 ** (log2 - 2), codec: "deflate", raw_bytes: 2 ** log2 };
      pos += fr.length;
      return r;
    });
    const idx = cborEncode({ version: 2, rank: 0, world_size: 1, tag: "t", records: recs }) as Uint8Array;
    const out = new Uint8Array(pos + idx.length + 24);
    out.set(b.subarray(0, 16));
    let at = 16;
    for (const fr of frames) {
      out.set(fr, at);
      at += fr.length;
    }
    out.set(idx, at);
    const dv = new DataView(out.buffer);
    dv.setBigUint64(at + idx.length, BigInt(at), true);
    dv.setUint32(at + idx.length + 8, idx.length, true);
    dv.setUint32(at + idx.length + 12, crc32(idx), true);
    out.set(new TextEncoder().encode("ZMCKEND\0"), at + idx.length + 16);
    writeFileSync(f, out);
    const rss0 = process.memoryUsage.rss();
    const e = thrown(() => RecordFileReader.open(f).verifyAll());
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e.message).toContain(`${f}: record "u/m/0": `);
    expect(e.message).toMatch(want);
    expect(process.memoryUsage.rss() - rss0).toBeLessThan(64 << 20);
    expect(MAX_DEFLATE_RATIO).toBe(1032);
  });
});
