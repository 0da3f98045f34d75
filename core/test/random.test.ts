import { describe, expect, test } from "bun:test";
import { normalFill, philox4x32, randint, streamKey, uniformFill } from "../src/tensor/random.ts";
import { philoxBlocks, PHILOX_WASM_MAX_WORDS } from "@zeromoe/kernels";

const hex = (a: Uint32Array) => Array.from(a, (x) => x.toString(16).padStart(8, "0"));

describe("Philox4x32-10", () => {
  test("Random123 known-answer vectors", () => {
    const o = new Uint32Array(4);
    philox4x32(0, 0, 0, 0, 0, 0, o);
    expect(hex(o)).toEqual(["6627e8d5", "e169c58d", "bc57ac4c", "9b00dbd8"]);
    philox4x32(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, o);
    expect(hex(o)).toEqual(["408f276d", "41c83b0e", "a20bc7c6", "6d5451fd"]);
    philox4x32(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, o);
    expect(hex(o)).toEqual(["d16cfe09", "94fdcceb", "5001e420", "24126ea1"]);
  });
  test("normal samples: moments, random access, distinct streams", () => {
    const key = streamKey(7, "w");
    const a = new Float64Array(20011);
    normalFill(a, key, 0, 1);
    const mean = a.reduce((s, v) => s + v, 0) / a.length;
    const v = a.reduce((s, x) => s + (x - mean) ** 2, 0) / a.length;
    expect(Math.abs(mean)).toBeLessThan(0.03);
    expect(Math.abs(v - 1)).toBeLessThan(0.05);
    const part = new Float64Array(13);
    normalFill(part, key, 9999, 1);
    expect(Array.from(part)).toEqual(Array.from(a.slice(9999, 10012)));
    const b = new Float64Array(8);
    normalFill(b, streamKey(7, "v"), 0, 1);
    expect(Array.from(b)).not.toEqual(Array.from(a.slice(0, 8)));
    const u = new Float64Array(5003);
    uniformFill(u, key, 0);
    expect(Math.min(...u)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...u)).toBeLessThan(1);
  });
});

/** The streams' definition, one element at a time (the original implementation): element i of a
 * normal stream is the cos (even i) / sin (odd i) half of a Box–Muller pair from Philox counter
 * ⌊i/2⌋; element i of a uniform stream is word i mod 4 of counter ⌊i/4⌋ with c2 = 1. */
function refNormal(n: number, key: [number, number], start: number, std: number, mean: number): Float64Array {
  const out = new Float64Array(n);
  const blk = new Uint32Array(4);
  for (let j = 0; j < n; j++) {
    const i = start + j;
    const c = Math.floor(i / 2);
    philox4x32(c >>> 0, Math.floor(c / 4294967296) >>> 0, 0, 0, key[0], key[1], blk);
    const u1 = (blk[0]! + 1) / 4294967296;
    const u2 = (blk[1]! + 1) / 4294967296;
    const r = Math.sqrt(-2 * Math.log(u1));
    const z = i % 2 === 0 ? r * Math.cos(2 * Math.PI * u2) : r * Math.sin(2 * Math.PI * u2);
    out[j] = mean + std * z;
  }
  return out;
}
function refUniform(n: number, key: [number, number], start: number, lo: number, hi: number): Float64Array {
  const out = new Float64Array(n);
  const blk = new Uint32Array(4);
  for (let j = 0; j < n; j++) {
    const i = start + j;
    const c = Math.floor(i / 4);
    philox4x32(c >>> 0, Math.floor(c / 4294967296) >>> 0, 1, 0, key[0], key[1], blk);
    out[j] = lo + (hi - lo) * (blk[i % 4]! / 4294967296);
  }
  return out;
}
function firstMismatch(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

describe("fast generators equal the element-wise definition bit for bit", () => {
  test("wasm Philox blocks = philox4x32 (counter carries into the high word, c2, 2 and 4 words)", () => {
    const o = new Uint32Array(4);
    for (const [k0, k1, c, c2] of [[0, 0, 0, 0], [0xffffffff, 0xffffffff, 2 ** 32 - 3, 1], [0xa4093822, 0x299f31d0, 2 ** 45 + 17, 0]] as const) {
      for (const words of [2, 4] as const) {
        const n = 1009;
        const got = philoxBlocks([k0, k1], c, c2, n, words);
        if (!got) continue; // no WebAssembly: random.ts uses philox4x32 itself
        const copy = got.slice(0, n * words);
        for (let i = 0; i < n; i++) {
          const ci = c + i;
          philox4x32(ci >>> 0, Math.floor(ci / 4294967296) >>> 0, c2, 0, k0, k1, o);
          for (let w = 0; w < words; w++) if (copy[i * words + w] !== o[w]) throw new Error(`block ${i} word ${w}: ${copy[i * words + w]} vs ${o[w]}`);
        }
      }
    }
    expect(() => philoxBlocks([1, 2], 0, 0, PHILOX_WASM_MAX_WORDS / 2 + 1, 2)).toThrow(/exceed/);
  });
  test("normalFill / uniformFill / randint at odd starts and lengths, f32 and f64, near 2^32 counters", () => {
    const starts = [0, 1, 2, 3, 8191, 8192, 8193, 2 ** 33 - 3, 2 ** 40 + 1];
    const lens = [0, 1, 2, 3, 5, 8191, 8193, 16387];
    for (const start of starts) {
      for (const n of lens) {
        const key = streamKey(start % 11, `s${n}`);
        const rn = refNormal(n, key, start, 0.02, 0.25);
        const ru = refUniform(n, key, start, -1, 3);
        const a = new Float64Array(n);
        normalFill(a, key, start, 0.02, 0.25);
        expect(firstMismatch(a, rn)).toBe(-1);
        const f = new Float32Array(n);
        normalFill(f, key, start, 0.02, 0.25);
        expect(firstMismatch(f, Float32Array.from(rn))).toBe(-1);
        uniformFill(a, key, start, -1, 3);
        expect(firstMismatch(a, ru)).toBe(-1);
      }
    }
    const ids = randint(4099, 37, streamKey(1, "r"), 5);
    const u = refUniform(4099, streamKey(1, "r"), 5, 0, 1);
    expect(firstMismatch(ids, Int32Array.from(u, (x) => Math.min(36, Math.floor(x * 37))))).toBe(-1);
  });
});
