import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadStateDict } from "../src/checkpoint/hf-load.ts";
import { writeSafetensors } from "../src/checkpoint/safetensors.ts";
import { rng, testDir } from "./safetensors-setup.ts";

const dir = testDir("hfload");

/** Reference f16 decoder written from the IEEE-754 binary16 definition. */
function f16Ref(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Reference bf16 decoder: place the 16 bits at the top of an f32 via DataView. */
function bf16Ref(h: number): number {
  const dv = new DataView(new ArrayBuffer(4));
  dv.setUint16(0, h, false);
  dv.setUint16(2, 0, false);
  return dv.getFloat32(0, false);
}

function sameFloat(a: number, b: number): boolean {
  return Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
}

describe("loadStateDict conversions", () => {
  test("every f16 and bf16 bit pattern widens exactly to f32", () => {
    const all = new Uint16Array(65536);
    for (let i = 0; i < 65536; i++) all[i] = i;
    const p = join(dir, "halves.safetensors");
    writeSafetensors(p, [
      { name: "h", dtype: "F16", shape: [256, 256], data: all },
      { name: "b", dtype: "BF16", shape: [65536], data: all },
    ]);
    const m = loadStateDict(p);
    const h = m.get("h")!;
    const b = m.get("b")!;
    expect(h.dtype).toBe("f32");
    expect(h.shape).toEqual([256, 256]);
    expect(h.sourceDtype).toBe("F16");
    let bad = 0;
    for (let i = 0; i < 65536; i++) {
      if (!sameFloat(h.data[i], f16Ref(i))) bad++;
      if (!sameFloat(b.data[i], bf16Ref(i))) bad++;
    }
    expect(bad).toBe(0);
  });

  test("f32 is kept, f64 rounds to nearest f32, integers become i32", () => {
    const r = rng(11);
    const f32 = Float32Array.from({ length: 37 }, () => (r() - 0.5) * 1e3);
    const f64 = Float64Array.from({ length: 5 }, () => (r() - 0.5) * 1e-3);
    const i64 = BigInt64Array.from([-2147483648n, 2147483647n, 0n, -5n, 123456789n]);
    const u8 = Uint8Array.from([0, 1, 255]);
    const i16 = Int16Array.from([-32768, 7, 32767]);
    const p = join(dir, "mixed.safetensors");
    writeSafetensors(p, [
      { name: "f32", dtype: "F32", shape: [37], data: f32 },
      { name: "f64", dtype: "F64", shape: [5, 1], data: f64 },
      { name: "i64", dtype: "I64", shape: [5], data: i64 },
      { name: "u8", dtype: "U8", shape: [3], data: u8 },
      { name: "bool", dtype: "BOOL", shape: [3], data: Uint8Array.from([1, 0, 1]) },
      { name: "i16", dtype: "I16", shape: [3], data: i16 },
      { name: "u32", dtype: "U32", shape: [1], data: Uint32Array.from([2147483647]) },
      { name: "scalar", dtype: "F32", shape: [], data: Float32Array.from([3.5]) },
    ]);
    const m = loadStateDict(p);
    expect(Array.from(m.get("f32")!.data)).toEqual(Array.from(f32));
    expect(Array.from(m.get("f64")!.data)).toEqual(Array.from(f64, (x) => Math.fround(x)));
    expect(m.get("i64")!.dtype).toBe("i32");
    expect(Array.from(m.get("i64")!.data)).toEqual([-2147483648, 2147483647, 0, -5, 123456789]);
    expect(Array.from(m.get("u8")!.data)).toEqual([0, 1, 255]);
    expect(Array.from(m.get("bool")!.data)).toEqual([1, 0, 1]);
    expect(Array.from(m.get("i16")!.data)).toEqual([-32768, 7, 32767]);
    expect(Array.from(m.get("u32")!.data)).toEqual([2147483647]);
    expect(m.get("scalar")!.shape).toEqual([]);
    expect(Array.from(m.get("scalar")!.data)).toEqual([3.5]);
  });

  test("out-of-range integers and unsupported dtypes are refused with the tensor named", () => {
    const p1 = join(dir, "big.safetensors");
    writeSafetensors(p1, [{ name: "ids", dtype: "I64", shape: [3], data: BigInt64Array.from([1n, 2n ** 31n, 3n]) }]);
    expect(() => loadStateDict(p1)).toThrow(/big\.safetensors tensor "ids": element 1 = 2147483648 does not fit in i32/);
    const p2 = join(dir, "u32.safetensors");
    writeSafetensors(p2, [{ name: "u", dtype: "U32", shape: [2], data: Uint32Array.from([5, 4294967295]) }]);
    expect(() => loadStateDict(p2)).toThrow(/tensor "u": element 1 = 4294967295 does not fit in i32/);
    const p3 = join(dir, "fp8.safetensors");
    writeSafetensors(p3, [{ name: "q", dtype: "F8_E4M3", shape: [4], data: new Uint8Array(4) }]);
    expect(() => loadStateDict(p3)).toThrow(/tensor "q": dtype F8_E4M3 is not supported/);
  });

  test("filter skips tensors", () => {
    const p = join(dir, "filter.safetensors");
    writeSafetensors(p, [
      { name: "keep", dtype: "F32", shape: [2], data: Float32Array.from([1, 2]) },
      { name: "drop", dtype: "I64", shape: [1], data: BigInt64Array.from([2n ** 40n]) },
    ]);
    const m = loadStateDict(p, { filter: (n) => n !== "drop" });
    expect([...m.keys()]).toEqual(["keep"]);
  });
});

describe("loadStateDict on checkpoint directories", () => {
  test("a sharded checkpoint with model.safetensors.index.json loads every shard", () => {
    const d = join(dir, "sharded");
    mkdirSync(d);
    const r = rng(12);
    const a = Float32Array.from({ length: 13 }, () => r());
    const b = Float32Array.from({ length: 7 }, () => r());
    writeSafetensors(join(d, "model-00001-of-00002.safetensors"), [{ name: "a", dtype: "F32", shape: [13], data: a }]);
    writeSafetensors(join(d, "model-00002-of-00002.safetensors"), [{ name: "b", dtype: "F32", shape: [7], data: b }]);
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: { total_size: 80 }, weight_map: { a: "model-00001-of-00002.safetensors", b: "model-00002-of-00002.safetensors" } }));
    const m = loadStateDict(d);
    expect(Array.from(m.get("a")!.data)).toEqual(Array.from(a));
    expect(Array.from(m.get("b")!.data)).toEqual(Array.from(b));
  });

  test("a tensor in two shards, a path escaping the directory, or an empty directory is refused", () => {
    const d = join(dir, "dup");
    mkdirSync(d);
    writeSafetensors(join(d, "s1.safetensors"), [{ name: "a", dtype: "F32", shape: [1], data: Float32Array.from([1]) }]);
    writeSafetensors(join(d, "s2.safetensors"), [{ name: "a", dtype: "F32", shape: [1], data: Float32Array.from([2]) }]);
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ weight_map: { a: "s1.safetensors", b: "s2.safetensors" } }));
    expect(() => loadStateDict(d)).toThrow(/s2\.safetensors tensor "a": tensor appears in more than one shard/);
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ weight_map: { a: "../x.safetensors" } }));
    expect(() => loadStateDict(d)).toThrow(/tensor "a": weight_map entry must be a plain file name/);
    writeFileSync(join(d, "model.safetensors.index.json"), "{not json");
    expect(() => loadStateDict(d)).toThrow(/index is not valid JSON/);
    const empty = join(dir, "empty");
    mkdirSync(empty);
    expect(() => loadStateDict(empty)).toThrow(/neither model\.safetensors nor model\.safetensors\.index\.json/);
  });
});
