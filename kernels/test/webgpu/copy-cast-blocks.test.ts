/**
 * The fill / copy / cast kernels (kernels/src/wgsl/fill-copy-cast.ts) at sizes that span several
 * invocation blocks: each invocation handles EW_PER_INVOCATION words or elements at a 256 stride,
 * so every one of them (and the partial first / last word of a 16-bit range at an odd offset) must
 * be written exactly once, bit for bit, and nothing outside the range touched. The op conformance
 * suite (kernels/test/ops/memory.ts) covers the rounding edge cases at smaller sizes.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createGPU } from "../../src/ffi/index.ts";
import { bf16FromF32, f16FromF32, f16ToNumber } from "../../src/numerics/index.ts";
import { randomF64 } from "../../src/testing.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { EW_PER_INVOCATION } from "../../src/wgsl/fill-copy-cast.ts";

let be: WebGpuBackend;
beforeAll(async () => {
  be = await WebGpuBackend.create(createGPU());
});
afterAll(() => be?.destroy());

const SENT = 0x7777;
/** Sizes: below one block, exactly one (256·EW_PER_INVOCATION words), one more, several with a ragged end. */
const SIZES = [3, 2 * 256 * EW_PER_INVOCATION, 2 * 256 * EW_PER_INVOCATION + 1, 9 * 256 * EW_PER_INVOCATION + 3 * 256 + 17];

/** A 16-bit buffer of n + 2·pad halves, all SENT; the view starts at element `pad`. */
function sentinel16(dtype: "f16" | "bf16", n: number, pad: number) {
  const buf = be.alloc(dtype, n + 2 * pad, "other");
  be.write({ buf, off: 0 }, new Uint16Array(n + 2 * pad).fill(SENT));
  return buf;
}

test("f32 → bf16 / f16 casts at odd and even offsets: every half exact, neighbours untouched", async () => {
  for (const n of SIZES) {
    for (const pad of [3, 4]) {
      const xs = Float32Array.from(randomF64(n, n + pad), (x, i) => x * 2 ** ((i % 37) - 18));
      const src = be.alloc("f32", n + 5, "other");
      be.write({ buf: src, off: 5 }, xs);
      for (const [d, bits] of [["bf16", bf16FromF32], ["f16", f16FromF32]] as const) {
        const dst = sentinel16(d, n, pad);
        be.cast({ buf: src, off: 5 }, { buf: dst, off: pad }, n);
        const got = (await be.read({ buf: dst, off: 0 }, n + 2 * pad)) as Uint16Array;
        let bad = "";
        for (let i = 0; i < n + 2 * pad && !bad; i++) {
          const want = i < pad || i >= pad + n ? SENT : bits(xs[i - pad]!);
          if (got[i] !== want) bad = `${d} n ${n} pad ${pad} at ${i}: got ${got[i]}, want ${want}`;
        }
        expect(bad).toBe("");
        be.free(dst);
      }
      be.free(src);
    }
  }
});

test("f16 → f32 cast and an odd-offset bf16 copy (the word writer from 16-bit sources)", async () => {
  for (const n of SIZES) {
    const hs = Uint16Array.from(randomF64(n, 7 * n), (x) => f16FromF32(x * 100));
    const src = be.alloc("f16", n + 1, "other");
    be.write({ buf: src, off: 1 }, hs);
    const out = be.alloc("f32", n + 2, "other");
    be.write({ buf: out, off: 0 }, new Float32Array(n + 2).fill(-5));
    be.cast({ buf: src, off: 1 }, { buf: out, off: 1 }, n);
    const got = (await be.read({ buf: out, off: 0 }, n + 2)) as Float32Array;
    expect(got[0]).toBe(-5);
    expect(got[n + 1]).toBe(-5);
    let bad = "";
    for (let i = 0; i < n && !bad; i++) if (got[i + 1] !== f16ToNumber(hs[i]!)) bad = `f16→f32 n ${n} at ${i}`;
    expect(bad).toBe("");
    // same-dtype copy with src and dst offsets of different parity (not 4-byte aligned: the kernel path)
    const dst = sentinel16("f16", n, 2);
    be.copy({ buf: src, off: 1 }, { buf: dst, off: 2 }, n);
    const c = (await be.read({ buf: dst, off: 0 }, n + 4)) as Uint16Array;
    let badc = "";
    for (let i = 0; i < n + 4 && !badc; i++) {
      const want = i < 2 || i >= n + 2 ? SENT : hs[i - 2]!;
      if (c[i] !== want) badc = `copy n ${n} at ${i}: got ${c[i]}, want ${want}`;
    }
    expect(badc).toBe("");
    for (const b of [src, out, dst]) be.free(b);
  }
});

test("fill of a 16-bit range at an odd offset spanning several blocks", async () => {
  for (const n of SIZES) {
    const dst = sentinel16("bf16", n, 3);
    be.fill({ buf: dst, off: 3 }, -2.5, n);
    const got = (await be.read({ buf: dst, off: 0 }, n + 6)) as Uint16Array;
    let bad = "";
    for (let i = 0; i < n + 6 && !bad; i++) {
      const want = i < 3 || i >= n + 3 ? SENT : bf16FromF32(-2.5);
      if (got[i] !== want) bad = `fill n ${n} at ${i}: got ${got[i]}, want ${want}`;
    }
    expect(bad).toBe("");
    be.free(dst);
  }
});
