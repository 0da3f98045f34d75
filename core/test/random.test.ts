import { describe, expect, test } from "bun:test";
import { normalFill, philox4x32, streamKey, uniformFill } from "../src/tensor/random.ts";

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
