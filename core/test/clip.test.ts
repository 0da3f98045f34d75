import { describe, expect, test } from "bun:test";
import { clipCoefficient, unscaleAndClip } from "../src/optim/clip.ts";

describe("clip", () => {
  test("coefficient = max_norm / (norm + 1e-6), capped at 1", () => {
    expect(clipCoefficient(7, 1)).toBeCloseTo(1 / 7.000001, 15);
    expect(clipCoefficient(0.3, 1)).toBe(1);
    expect(clipCoefficient(123, 0)).toBe(1); // clipping off
    expect(clipCoefficient(Infinity, 1)).toBeNaN();
  });
  test("unscale and clip from a scaled sum of squares (random grads vs direct computation)", () => {
    let seed = 17;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1;
    const g = Array.from({ length: 101 }, () => rnd() * 3);
    const scale = 1024;
    const scaledSumSq = g.reduce((a, x) => a + (x * scale) ** 2, 0);
    const r = unscaleAndClip(scaledSumSq, scale, 2.5);
    const norm = Math.hypot(...g);
    expect(r.norm).toBeCloseTo(norm, 9);
    expect(r.clipCoef).toBeCloseTo(Math.min(1, 2.5 / (norm + 1e-6)), 12);
    // the clipped, unscaled gradient has norm ≈ max_norm
    const clipped = g.map((x) => x * scale * r.gradScale);
    expect(Math.hypot(...clipped)).toBeCloseTo(2.5, 5);
    expect(() => unscaleAndClip(1, 0, 1)).toThrow(/lossScale/);
  });
});
