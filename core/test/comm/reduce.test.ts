/**
 * reduceInto (the arithmetic of every reducing collective) against the independent reference:
 * random data at awkward lengths (1, primes, across the 8192-element block), every kind, sum, max
 * and average; NaN propagation of max; integer wrap-around; refusal of average on integers.
 */

import { expect, test } from "bun:test";
import { reduceInto } from "../../src/comm/reduce.ts";
import { KINDS, randomArray, refReduce, sameStored } from "./reference.ts";

for (const kind of KINDS) {
  for (const len of [1, 2, 13, 8191, 8209]) {
    for (const nSrc of [1, 2, 3, 5]) {
      test(`${kind} len ${len}, ${nSrc} sources: sum, max, average match the reference`, () => {
        const seed = len * 7 + nSrc;
        const ranks = Array.from({ length: nSrc }, (_, k) => k);
        const srcs = ranks.map((r) => randomArray(kind, seed, r, len));
        const float = kind !== "i32" && kind !== "u32";
        const variants: Array<[("sum" | "max"), boolean]> = [["sum", false], ["max", false]];
        if (float) variants.push(["sum", true]);
        for (const [op, avg] of variants) {
          const out = randomArray(kind, seed + 99, 0, len + 3); // garbage to overwrite, plus an offset
          reduceInto(out, 3, srcs, len, op, avg, nSrc, kind === "f16" ? "f16" : "bf16");
          let bad = 0;
          for (let i = 0; i < len; i++) if (!sameStored(out[3 + i], refReduce(kind, seed, ranks, i, op, avg))) bad++;
          expect(`${op}${avg ? " avg" : ""}: ${bad} wrong`).toBe(`${op}${avg ? " avg" : ""}: 0 wrong`);
        }
      });
    }
  }
}

test("in place on the first source gives the same result", () => {
  const srcs = [0, 1, 2].map((r) => randomArray("f32", 5, r, 1009));
  const expected = new Float32Array(1009);
  reduceInto(expected, 0, srcs, 1009, "sum", false, 3, "bf16");
  reduceInto(srcs[0], 0, srcs, 1009, "sum", false, 3, "bf16");
  expect(Array.from(srcs[0])).toEqual(Array.from(expected));
});

test("f32 sums are f32 arithmetic in order, not f64 then rounded", () => {
  // 1 + 2^-24 + 2^-24: in f32 order each add rounds back to 1; in f64 the sum rounds up.
  const a = new Float32Array([1]);
  const b = new Float32Array([2 ** -24]);
  const out = new Float32Array(1);
  reduceInto(out, 0, [a, b, b], 1, "sum", false, 3, "bf16");
  expect(out[0]).toBe(1);
  reduceInto(out, 0, [b, b, a], 1, "sum", false, 3, "bf16");
  expect(out[0]).toBe(1 + 2 ** -23);
});

test("max propagates NaN whichever source holds it", () => {
  const a = new Float32Array([1, NaN, 3]);
  const b = new Float32Array([NaN, 2, -1]);
  const out = new Float32Array(3);
  reduceInto(out, 0, [a, b], 3, "max", false, 2, "bf16");
  expect(Number.isNaN(out[0]) && Number.isNaN(out[1])).toBe(true);
  expect(out[2]).toBe(3);
});

test("integer sums wrap modulo 2^32", () => {
  const out = new Int32Array(1);
  reduceInto(out, 0, [new Int32Array([2 ** 31 - 1]), new Int32Array([5])], 1, "sum", false, 2, "bf16");
  expect(out[0]).toBe(-(2 ** 31) + 4);
  const u = new Uint32Array(1);
  reduceInto(u, 0, [new Uint32Array([2 ** 32 - 2]), new Uint32Array([7])], 1, "sum", false, 2, "bf16");
  expect(u[0]).toBe(5);
});

test("average is refused for integers and for max", () => {
  expect(() => reduceInto(new Int32Array(1), 0, [new Int32Array([3])], 1, "sum", true, 1, "bf16")).toThrow(/average is not defined for Int32Array/);
  expect(() => reduceInto(new Float32Array(1), 0, [new Float32Array([3])], 1, "max", true, 1, "bf16")).toThrow(/average is only defined for op "sum"/);
});
