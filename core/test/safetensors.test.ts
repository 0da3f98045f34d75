import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  SAFETENSORS_DTYPE_BYTES,
  SafetensorsError,
  SafetensorsReader,
  SafetensorsWriter,
  parseSafetensorsBytes,
  writeSafetensors,
  type SafetensorsDType,
  type SafetensorsTensor,
} from "../src/checkpoint/safetensors.ts";
import { decodeTensor } from "../src/checkpoint/hf-load.ts";
import { rng, testDir } from "./safetensors-setup.ts";

const dir = testDir("st");

function randomBytes(n: number, r: () => number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(r() * 256);
  return b;
}

function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Hand-built file, independent of the writer: 8-byte LE length, JSON, data. */
function handBuild(header: unknown, data: Uint8Array, pad = 0): Uint8Array<ArrayBuffer> {
  const json = new TextEncoder().encode(JSON.stringify(header) + " ".repeat(pad));
  const out = new Uint8Array(8 + json.length + data.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, json.length, true);
  dv.setUint32(4, 0, true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

function sampleTensors(seed: number): SafetensorsTensor[] {
  const r = rng(seed);
  const shapes: Array<[string, SafetensorsDType, number[]]> = [
    ["model.embed_tokens.weight", "F32", [7, 13]],
    ["scalar", "F32", []],
    ["empty", "BF16", [3, 0]],
    ["h.bf16", "BF16", [5]],
    ["h.f16", "F16", [1, 11]],
    ["ids", "I64", [2, 3]],
    ["i32", "I32", [17]],
    ["u8", "U8", [3]],
    ["f64", "F64", [2]],
    ["bool", "BOOL", [1]],
  ];
  return shapes.map(([name, dtype, shape]) => ({ name, dtype, shape, data: randomBytes(numel(shape) * SAFETENSORS_DTYPE_BYTES[dtype], r) }));
}

describe("safetensors round trip", () => {
  test("writer output reads back byte-exact through the file reader and the in-memory parser", () => {
    const tensors = sampleTensors(1);
    const path = join(dir, "rt.safetensors");
    writeSafetensors(path, tensors, { format: "pt", note: "ünïcode" });
    const r = SafetensorsReader.open(path);
    try {
      expect(r.header.metadata).toEqual({ format: "pt", note: "ünïcode" });
      expect(r.names().sort()).toEqual(tensors.map((t) => t.name).sort());
      expect(r.header.dataStart % 8).toBe(0);
      for (const t of tensors) {
        const info = r.info(t.name);
        expect(info.dtype).toBe(t.dtype);
        expect([...info.shape]).toEqual([...t.shape]);
        expect(r.readTensorBytes(t.name)).toEqual(t.data as Uint8Array);
      }
    } finally {
      r.close();
    }
    const mem = parseSafetensorsBytes(new Uint8Array(readFileSync(path)), path);
    for (const t of tensors) expect(mem.tensor(t.name)).toEqual(t.data as Uint8Array);
    expect(readdirSync(dir).filter((f) => f.includes(".tmp-"))).toEqual([]);
  });

  test("reader parses a hand-built file (unsorted keys, padding, no metadata)", () => {
    const r = rng(2);
    const a = new Float32Array([1.5, -2.25, 3]);
    const b = randomBytes(2 * 5, r);
    const data = new Uint8Array(12 + 10);
    data.set(b, 0);
    data.set(new Uint8Array(a.buffer), 10);
    const file = handBuild({ "z.a": { dtype: "F32", shape: [3], data_offsets: [10, 22] }, "y.b": { dtype: "BF16", shape: [5, 1], data_offsets: [0, 10] } }, data, 5);
    const p = parseSafetensorsBytes(file, "hand");
    expect(p.header.metadata).toBeNull();
    expect(p.header.tensors.map((t) => t.name)).toEqual(["y.b", "z.a"]);
    expect(new Float32Array(p.tensor("z.a").slice().buffer)).toEqual(a);
    expect(p.tensor("y.b")).toEqual(b);
    expect(() => p.tensor("nope")).toThrow(/hand tensor "nope": no such tensor/);
  });

  test("writer bytes equal an independently built file", () => {
    const t: SafetensorsTensor[] = [
      { name: "w", dtype: "F32", shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
      { name: "b", dtype: "I32", shape: [1], data: new Int32Array([-7]) },
    ];
    const path = join(dir, "exact.safetensors");
    writeSafetensors(path, t);
    const header = { w: { dtype: "F32", shape: [2, 3], data_offsets: [0, 24] }, b: { dtype: "I32", shape: [1], data_offsets: [24, 28] } };
    const jsonLen = JSON.stringify(header).length;
    const pad = (8 - ((8 + jsonLen) % 8)) % 8;
    const data = new Uint8Array(28);
    data.set(new Uint8Array(new Float32Array([1, 2, 3, 4, 5, 6]).buffer), 0);
    new DataView(data.buffer).setInt32(24, -7, true);
    expect(new Uint8Array(readFileSync(path))).toEqual(handBuild(header, data, pad));
  });

  test("readTensorElements reads a sub-range of a tensor (a rank's shard)", () => {
    const r0 = rng(9);
    const w = Float32Array.from({ length: 7 * 13 }, () => r0() - 0.5);
    const path = join(dir, "range.safetensors");
    writeSafetensors(path, [
      { name: "pad", dtype: "U8", shape: [3], data: Uint8Array.from([1, 2, 3]) },
      { name: "w", dtype: "F32", shape: [7, 13], data: w },
    ]);
    const r = SafetensorsReader.open(path);
    try {
      for (const [start, count] of [
        [0, 91],
        [5, 17],
        [90, 1],
        [91, 0],
      ]) {
        const got = new Float32Array(r.readTensorElements("w", start, count).buffer);
        expect(Array.from(got)).toEqual(Array.from(w.subarray(start, start + count)));
      }
      expect(() => r.readTensorElements("w", 90, 2)).toThrow(/tensor "w": element range \[90, 92\) is outside \[0, 91\)/);
      expect(() => r.readTensorElements("w", -1, 1)).toThrow(/outside/);
      expect(() => r.readTensorElements("w", 0.5, 1)).toThrow(/outside/);
    } finally {
      r.close();
    }
    expect(() => r.readTensorElements("w", 0, 1)).toThrow(/reader is closed/);
  });

  test("an empty state dict round-trips", () => {
    const path = join(dir, "empty.safetensors");
    writeSafetensors(path, []);
    const r = SafetensorsReader.open(path);
    expect(r.names()).toEqual([]);
    r.close();
  });
});

describe("streaming writer", () => {
  const specs = [
    { name: "a", dtype: "F32" as const, shape: [13] },
    { name: "zero", dtype: "F16" as const, shape: [0] },
    { name: "b", dtype: "BF16" as const, shape: [3, 7] },
  ];

  test("parts in order produce the same file as whole writes", () => {
    const r = rng(3);
    const a = randomBytes(52, r);
    const b = randomBytes(42, r);
    const p1 = join(dir, "parts.safetensors");
    const w = SafetensorsWriter.create(p1, specs);
    expect(w.next).toBe("a");
    w.writeTensorPart("a", a.subarray(0, 5));
    w.writeTensorPart("a", a.subarray(5, 52));
    expect(w.next).toBe("b"); // zero-size tensor needs no write
    w.writeTensorPart("b", b.subarray(0, 41));
    w.writeTensorPart("b", b.subarray(41));
    expect(w.next).toBeNull();
    w.finish();
    const p2 = join(dir, "whole.safetensors");
    writeSafetensors(p2, [
      { ...specs[0], data: a },
      { ...specs[1], data: new Uint8Array(0) },
      { ...specs[2], data: b },
    ]);
    expect(readFileSync(p1)).toEqual(readFileSync(p2));
  });

  test("misuse is refused with the tensor named, and the temp file does not survive", () => {
    const p = join(dir, "bad.safetensors");
    const w = SafetensorsWriter.create(p, specs);
    expect(() => w.writeTensor("b", new Uint8Array(42))).toThrow(/tensor "b": tensors must be written in declared order; expected "a" next/);
    expect(() => w.writeTensor("a", new Uint8Array(51))).toThrow(/tensor "a": writeTensor got 51 bytes; expected 52/);
    w.writeTensorPart("a", new Uint8Array(50));
    expect(() => w.writeTensorPart("a", new Uint8Array(3))).toThrow(/overruns the 2 bytes left/);
    expect(() => w.finish()).toThrow(/finish\(\) before all tensors were written.*/);
    expect(readdirSync(dir).filter((f) => f.startsWith(".bad.safetensors"))).toEqual([]);
    expect(() => readFileSync(p)).toThrow();
    const w2 = SafetensorsWriter.create(p, specs);
    w2.abort();
    expect(readdirSync(dir).filter((f) => f.startsWith(".bad.safetensors"))).toEqual([]);
  });

  test("invalid specs are refused", () => {
    const p = join(dir, "specs.safetensors");
    expect(() => SafetensorsWriter.create(p, [specs[0], specs[0]])).toThrow(/tensor "a": duplicate tensor name/);
    expect(() => SafetensorsWriter.create(p, [{ name: "__metadata__", dtype: "F32", shape: [1] }])).toThrow(/reserved/);
    expect(() => SafetensorsWriter.create(p, [{ name: "x", dtype: "F31" as SafetensorsDType, shape: [1] }])).toThrow(/tensor "x": unknown dtype "F31"/);
    expect(() => SafetensorsWriter.create(p, [{ name: "x", dtype: "F32", shape: [2.5] }])).toThrow(/non-negative integers/);
    expect(() => writeSafetensors(p, [{ name: "x", dtype: "F32", shape: [3], data: new Float32Array(2) }])).toThrow(/tensor "x": data is 8 bytes; shape \[3\] of F32 needs 12/);
  });
});

describe("validation of untrusted files", () => {
  const good = { a: { dtype: "F32", shape: [2], data_offsets: [0, 8] }, b: { dtype: "U8", shape: [3], data_offsets: [8, 11] } };
  const data = randomBytes(11, rng(4));
  const cases: Array<[string, Uint8Array, RegExp]> = [
    ["short file", new Uint8Array(5), /file is 5 bytes; expected at least 8/],
    [
      "header length over the limit",
      (() => {
        const f = handBuild(good, data);
        new DataView(f.buffer).setUint32(0, 100_000_001, true);
        return f;
      })(),
      /header length 100000001 exceeds/,
    ],
    [
      "header length high word",
      (() => {
        const f = handBuild(good, data);
        new DataView(f.buffer).setUint32(4, 1, true);
        return f;
      })(),
      /exceeds the 100000000-byte limit/,
    ],
    [
      "header past end",
      (() => {
        const f = handBuild(good, data);
        new DataView(f.buffer).setUint32(0, f.length, true);
        return f;
      })(),
      /runs past the end/,
    ],
    ["not JSON", (() => { const f = handBuild(good, data); f[9] = 0x7d; return f; })(), /not valid JSON/],
    ["bad UTF-8", (() => { const f = handBuild(good, data); f[11] = 0xff; return f; })(), /not valid UTF-8/],
    ["array header", handBuild([1, 2], new Uint8Array(0)), /must start with '\{'/],
    ["unknown dtype", handBuild({ ...good, a: { ...good.a, dtype: "F128" } }, data), /tensor "a": unknown dtype "F128"/],
    ["negative dim", handBuild({ ...good, b: { ...good.b, shape: [-3] } }, data), /tensor "b": shape \[-3\] must hold non-negative integers/],
    ["fractional dim", handBuild({ ...good, b: { ...good.b, shape: [1.5, 2] } }, data), /tensor "b": shape/],
    ["string dim", handBuild({ ...good, b: { ...good.b, shape: ["3"] } }, data), /tensor "b": shape/],
    ["missing offsets", handBuild({ ...good, b: { dtype: "U8", shape: [3] } }, data), /tensor "b": data_offsets must be \[begin, end\]/],
    ["reversed offsets", handBuild({ ...good, b: { ...good.b, data_offsets: [11, 8] } }, data), /tensor "b": data_offsets \[11,8\] must be integers with 0 ≤ begin ≤ end/],
    ["size mismatch", handBuild({ ...good, b: { ...good.b, shape: [2] } }, data), /tensor "b": data_offsets \[8, 11\] span 3 bytes; shape \[2\] of U8 needs 2/],
    ["huge shape", handBuild({ ...good, b: { ...good.b, shape: [2 ** 40, 2 ** 40] } }, data), /tensor "b": shape .* needs more bytes than/],
    ["offsets past data", handBuild({ ...good, b: { ...good.b, data_offsets: [8, 12] } }, data), /tensor "b": data_offsets \[8, 12\] run past the 11-byte data section/],
    ["overlap", handBuild({ a: good.a, b: { dtype: "U8", shape: [3], data_offsets: [6, 9] } }, data), /tensor "b": data_offsets \[6, 9\] overlap/],
    ["gap", handBuild({ a: good.a, b: { dtype: "U8", shape: [2], data_offsets: [9, 11] } }, data), /tensor "b": data_offsets \[9, 11\] leave a gap after byte 8/],
    ["trailing bytes", handBuild(good, new Uint8Array([...data, 1, 2])), /tensors end at data byte 11 but the data section is 13 bytes/],
    ["metadata not strings", handBuild({ ...good, __metadata__: { step: 3 } }, data), /__metadata__\["step"\] must be a string/],
    ["entry not object", handBuild({ ...good, c: 5 }, data), /tensor "c": entry must be an object/],
  ];
  for (const [label, bytes, re] of cases) {
    test(label, () => {
      let err: unknown;
      try {
        parseSafetensorsBytes(bytes, "case.safetensors");
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SafetensorsError);
      expect((err as Error).message).toMatch(/^safetensors case\.safetensors/);
      expect((err as Error).message).toMatch(re);
    });
  }

  test("the file reader reports the same errors with the path", () => {
    const p = join(dir, "gap.safetensors");
    writeFileSync(p, cases.find((c) => c[0] === "gap")![1]);
    expect(() => SafetensorsReader.open(p)).toThrow(new RegExp(`safetensors ${p.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} tensor "b"`));
  });
});

describe("mutation fuzz", () => {
  /** Check a successful parse: every tensor lies inside the file and reads back. */
  function checkValid(bytes: Uint8Array): void {
    const p = parseSafetensorsBytes(bytes, "fuzz");
    let total = 0;
    for (const t of p.header.tensors) {
      const b = p.tensor(t.name);
      expect(b.length).toBe(t.numel * SAFETENSORS_DTYPE_BYTES[t.dtype]);
      total += b.length;
      try {
        expect(decodeTensor(b.slice(), t, "fuzz").data.length).toBe(t.numel);
      } catch (e) {
        // Decoding refuses FP8/C64/U64 and out-of-range integers (random I64 bytes) cleanly; anything else is a bug.
        if (!(e instanceof SafetensorsError) || !/not supported|does not fit in i32/.test(e.message)) throw e;
      }
    }
    expect(p.header.dataStart + total).toBe(bytes.length);
  }

  function runCase(bytes: Uint8Array, counts: { ok: number; err: number }): void {
    try {
      checkValid(bytes);
      counts.ok++;
    } catch (e) {
      if (!(e instanceof SafetensorsError)) throw new Error(`non-SafetensorsError escaped: ${(e as Error)?.stack ?? e}`);
      counts.err++;
    }
  }

  const base = (() => {
    const path = join(dir, "fuzzbase.safetensors");
    writeSafetensors(path, sampleTensors(5), { format: "pt" });
    return new Uint8Array(readFileSync(path));
  })();
  const headerLen = new DataView(base.buffer, base.byteOffset).getUint32(0, true);

  test("4000 random byte-level corruptions end in a clean error or a valid parse", () => {
    const r = rng(6);
    const counts = { ok: 0, err: 0 };
    const pick = (n: number) => Math.floor(r() * n);
    const special = [0x00, 0x22, 0x2c, 0x2d, 0x30, 0x39, 0x5b, 0x5d, 0x7b, 0x7d, 0x3a, 0x20, 0x65, 0xff, 0xc3, 0x80];
    for (let i = 0; i < 4000; i++) {
      let b = base.slice();
      const kind = i % 6;
      const inHeader = () => 8 + pick(headerLen);
      if (kind === 0) {
        for (let k = 1 + pick(4); k > 0; k--) b[inHeader()] = pick(256);
      } else if (kind === 1) {
        for (let k = 1 + pick(3); k > 0; k--) b[inHeader()] = special[pick(special.length)];
      } else if (kind === 2) {
        b = b.slice(0, pick(b.length + 1));
      } else if (kind === 3) {
        const at = pick(b.length);
        const ins = randomBytes(1 + pick(8), r);
        b = new Uint8Array([...b.subarray(0, at), ...ins, ...b.subarray(at)]);
      } else if (kind === 4) {
        b[pick(8)] = pick(256);
      } else {
        const a = 8 + pick(headerLen);
        const len = 1 + pick(12);
        b = new Uint8Array([...b.subarray(0, a), ...b.subarray(a + len)]);
      }
      runCase(b, counts);
    }
    expect(counts.ok + counts.err).toBe(4000);
    expect(counts.err).toBeGreaterThan(3000);
  });

  test("3000 structural header corruptions (values swapped for hostile ones) end cleanly", () => {
    const r = rng(7);
    const pick = (n: number) => Math.floor(r() * n);
    const hostile: unknown[] = [-1, 0, 1, 2 ** 53, 2 ** 53 + 2, 1e308, -0.5, 1.5, "1", null, true, [], {}, [1, 2, 3], "F32", "BF16", "bogus", Number.MAX_SAFE_INTEGER, 2 ** 32, 7];
    const json = JSON.parse(new TextDecoder().decode(base.subarray(8, 8 + headerLen))) as Record<string, Record<string, unknown>>;
    const dataPart = base.subarray(8 + headerLen);
    const names = Object.keys(json);
    const counts = { ok: 0, err: 0 };
    for (let i = 0; i < 3000; i++) {
      const h = structuredClone(json) as Record<string, any>;
      const name = names[pick(names.length)];
      const field = ["dtype", "shape", "data_offsets", "shape.i", "data_offsets.i", "entry", "rename", "delete"][pick(8)];
      const v = hostile[pick(hostile.length)];
      if (name === "__metadata__") h[name] = field === "delete" ? undefined : { k: v };
      else if (field === "shape.i" && Array.isArray(h[name].shape) && h[name].shape.length > 0) h[name].shape[pick(h[name].shape.length)] = v;
      else if (field === "data_offsets.i") h[name].data_offsets[pick(2)] = v;
      else if (field === "entry") h[name] = v;
      else if (field === "rename") {
        h[`${name}.x`] = h[name];
        delete h[name];
      } else if (field === "delete") delete h[name];
      else h[name][field.replace(".i", "")] = v;
      runCase(handBuild(h, dataPart), counts);
    }
    expect(counts.ok + counts.err).toBe(3000);
    expect(counts.ok).toBeGreaterThan(0); // renames (and some no-op swaps) stay valid
  });

  test("200 corrupted files through the file reader end cleanly", () => {
    const r = rng(8);
    const p = join(dir, "fuzzfile.safetensors");
    let ok = 0;
    for (let i = 0; i < 200; i++) {
      const b = base.slice(0, i % 3 === 0 ? Math.floor(r() * base.length) : base.length);
      for (let k = 0; k < 3; k++) if (b.length > 0) b[Math.floor(r() * Math.min(b.length, 8 + headerLen))] = Math.floor(r() * 256);
      writeFileSync(p, b);
      try {
        const rd = SafetensorsReader.open(p);
        try {
          for (const n of rd.names()) rd.readTensorBytes(n);
        } finally {
          rd.close();
        }
        ok++;
      } catch (e) {
        if (!(e instanceof SafetensorsError)) throw e;
      }
    }
    expect(ok).toBeLessThan(200);
  });
});
