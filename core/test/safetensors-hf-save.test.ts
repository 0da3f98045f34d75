import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadStateDict } from "../src/checkpoint/hf-load.ts";
import { castTo16, saveStateDict } from "../src/checkpoint/hf-save.ts";
import { SafetensorsReader } from "../src/checkpoint/safetensors.ts";
import { rng, testDir } from "./safetensors-setup.ts";

const dir = testDir("hfsave");

/** Independent bf16 reference: pick the nearer of the two bf16 neighbours of x by value (ties to even). */
function bf16Ref(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  if (Number.isNaN(f[0])) return -1; // compared separately
  const lo = u >>> 16;
  const hi = (lo + 1) & 0xffff;
  // IEEE rounds as if the exponent were unbounded: the neighbour past the largest finite is ±2^128.
  const val = (h: number) => ((h & 0x7fff) === 0x7f80 ? (h & 0x8000 ? -1 : 1) * 2 ** 128 : new Float32Array(new Uint32Array([h << 16]).buffer)[0]);
  if ((u & 0xffff) === 0) return lo;
  const dLo = Math.abs(f[0] - val(lo));
  const dHi = Math.abs(val(hi) - f[0]);
  if (dLo < dHi) return lo;
  if (dHi < dLo) return hi;
  return lo % 2 === 0 ? lo : hi;
}

describe("saveStateDict", () => {
  test("f32 and i32 round-trip exactly through loadStateDict, with format=pt metadata", () => {
    const r = rng(21);
    const sd = new Map([
      ["model.embed_tokens.weight", { shape: [11, 7], data: Float32Array.from({ length: 77 }, () => r() - 0.5) }],
      ["f64", { shape: [3], data: Float64Array.from([0.1, -1e-40, 3e38]) }],
      ["ids", { shape: [2, 1], data: Int32Array.from([-3, 2147483647]) }],
      ["empty", { shape: [0, 5], data: new Float32Array(0) }],
    ] as const);
    const p = join(dir, "f32.safetensors");
    saveStateDict(p, sd, { metadata: { step: "3" } });
    const back = loadStateDict(p);
    expect([...back.keys()]).toEqual([...sd.keys()]);
    expect(Array.from(back.get("model.embed_tokens.weight")!.data)).toEqual(Array.from(sd.get("model.embed_tokens.weight")!.data));
    expect(Array.from(back.get("f64")!.data)).toEqual([0.1, -1e-40, 3e38].map(Math.fround));
    expect(back.get("ids")!.sourceDtype).toBe("I32");
    expect(Array.from(back.get("ids")!.data)).toEqual([-3, 2147483647]);
    expect(back.get("empty")!.shape).toEqual([0, 5]);
    const rd = SafetensorsReader.open(p);
    expect(rd.header.metadata).toEqual({ format: "pt", step: "3" });
    rd.close();
  });

  test("BF16 rounds to nearest even (vs a by-value reference) and F16 matches Float16Array's cast", () => {
    const r = rng(22);
    const vals: number[] = [];
    for (let i = 0; i < 5000; i++) vals.push((r() - 0.5) * 2 ** Math.floor(r() * 60 - 30));
    // exact ties and edge values
    vals.push(1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 65504, 65520, 65519.99, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 0, -0, Infinity, -Infinity, 3.4e38);
    const src = Float32Array.from(vals);
    const bf = castTo16(src, "BF16");
    const h = castTo16(src, "F16");
    const f16 = new Uint16Array(new Float16Array(src).buffer); // engine's IEEE round-to-nearest-even cast
    let bad = 0;
    for (let i = 0; i < src.length; i++) {
      if (bf[i] !== bf16Ref(src[i])) bad++;
      if (h[i] !== f16[i]) bad++;
    }
    expect(bad).toBe(0);
    const p = join(dir, "bf16.safetensors");
    saveStateDict(p, [["w", { shape: [src.length], data: src }]], { floatDtype: "BF16" });
    const back = loadStateDict(p).get("w")!;
    expect(back.sourceDtype).toBe("BF16");
    const widened = new Float32Array(new Uint32Array(Array.from(bf, (b) => b << 16)).buffer);
    expect(Array.from(back.data)).toEqual(Array.from(widened));
    const nan = castTo16(Float32Array.from([NaN]), "BF16")[0];
    expect((nan & 0x7f80) === 0x7f80 && (nan & 0x7f) !== 0).toBe(true);
  });

  test("a length that does not match the shape is refused with the tensor named", () => {
    expect(() => saveStateDict(join(dir, "bad.safetensors"), [["w", { shape: [2, 3], data: new Float32Array(5) }]])).toThrow(/tensor "w": data has 5 elements; shape \[2,3\] needs 6/);
  });
});
