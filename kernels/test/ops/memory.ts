/** Conformance: alloc/free/retag/memory accounting and the transfer ops (write, read, fill, copy, cast). */

import { expect } from "../../src/runtime/bdd.ts";
import { DTYPE_BYTES, MEM_TAGS, type DType } from "../../src/backend.ts";
import { refBf16Bits, refBf16Value, refF16Bits, refF16Value } from "../reference/cast.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

const DTYPES: DType[] = ["f32", "f16", "bf16", "i32", "u32"];

/** Registers the memory and transfer tests. */
export function memoryTests(t: T): void {
  t("alloc gives zeros; accounting is exact per tag, current and peak; free and retag", async (c) => {
    const be = c.be;
    be.resetPeak();
    const base = be.memory();
    const lens = [1, 7, 13, 1031];
    const bufs = DTYPES.map((d, i) => be.alloc(d, lens[i % lens.length]!, MEM_TAGS[i % MEM_TAGS.length]!));
    let m = be.memory();
    let total = 0;
    for (const tag of MEM_TAGS) {
      const want = bufs.filter((b) => b.tag === tag).reduce((s, b) => s + b.length * DTYPE_BYTES[b.dtype], 0);
      expect(m.current[tag] - base.current[tag]).toBe(want);
      total += want;
    }
    const baseTotal = MEM_TAGS.reduce((s, tg) => s + base.current[tg], 0);
    expect(m.peakTotal).toBe(Math.max(base.peakTotal, baseTotal + total));
    await be.flush();
    for (const b of bufs) {
      const z = await be.read({ buf: b, off: 0 }, b.length);
      expect(Array.from(z as ArrayLike<number>).every((v) => v === 0)).toBe(true);
    }
    // retag moves bytes between tags; peak of the new tag follows
    const b0 = bufs[0]!; // f32 × 1, tag param
    be.retag(b0, "comm");
    m = be.memory();
    expect(m.current.param - base.current.param).toBe(0);
    expect(m.current.comm - base.current.comm).toBe(4 + bufs.filter((b) => b !== b0 && b.tag === "comm").reduce((s, b) => s + b.length * DTYPE_BYTES[b.dtype], 0));
    for (const b of bufs) be.free(b);
    m = be.memory();
    for (const tag of MEM_TAGS) expect(m.current[tag]).toBe(base.current[tag]);
    expect(m.peakTotal).toBe(Math.max(base.peakTotal, baseTotal + total));
    be.resetPeak();
    m = be.memory();
    expect(m.peakTotal).toBe(baseTotal);
    for (const tag of MEM_TAGS) expect(m.peak[tag]).toBe(m.current[tag]);
  });

  t("free twice, use after free and negative lengths throw", async (c) => {
    const be = c.be;
    const b = be.alloc("f32", 5, "other");
    be.free(b);
    expect(() => be.free(b)).toThrow();
    expect(() => be.fill({ buf: b, off: 0 }, 1, 5)).toThrow();
    let rejected = false;
    try {
      await be.read({ buf: b, off: 0 }, 5);
    } catch {
      rejected = true;
    }
    expect(rejected).toBe(true);
    expect(() => be.alloc("f32", -1, "other")).toThrow();
  });

  t("write/read round trip at offsets for every dtype", async (c) => {
    const r = new Rng(1);
    for (const n of [1, 7, c.large(1031)]) {
      const f = r.f32(n, -5, 5);
      const v = c.input(f);
      expect(Array.from(await c.read(v, n))).toEqual(Array.from(f));
      const h = Uint16Array.from({ length: n }, () => r.int(0, 65536));
      for (const d of ["f16", "bf16"] as const) {
        const hv = c.input(h, d);
        expect(Array.from((await c.be.read(hv, n)) as Uint16Array)).toEqual(Array.from(h));
      }
      const iv = Int32Array.from({ length: n }, () => r.int(0, 2 ** 32) | 0);
      expect(Array.from((await c.be.read(c.input(iv, "i32"), n)) as Int32Array)).toEqual(Array.from(iv));
      const uv = Uint32Array.from({ length: n }, () => r.int(0, 2 ** 32));
      expect(Array.from((await c.be.read(c.input(uv, "u32"), n)) as Uint32Array)).toEqual(Array.from(uv));
    }
  });

  t("fill: f32, i32, u32 exact; f16/bf16 rounded to nearest even", async (c) => {
    for (const n of [1, 5, 67]) {
      const o = c.output(n);
      c.be.fill(o.view, Math.fround(0.1), n); // an f32 value, so f32 and f64-storage backends agree
      c.exact("fill f32", await o.read(), new Array(n).fill(Math.fround(0.1)));
      await o.checkGuards();
      const oi = c.output(n, "i32");
      c.be.fill(oi.view, -7, n);
      c.exact("fill i32", await oi.read(), new Array(n).fill(-7));
      await oi.checkGuards();
      const ou = c.output(n, "u32");
      c.be.fill(ou.view, 4000000000, n);
      c.exact("fill u32", await ou.read(), new Array(n).fill(4000000000));
      const oh = c.output(n, "f16");
      c.be.fill(oh.view, 0.1, n);
      c.exact("fill f16", await oh.read(), new Array(n).fill(refF16Bits(Math.fround(0.1))));
      await oh.checkGuards();
      const ob = c.output(n, "bf16");
      c.be.fill(ob.view, 0.1, n);
      c.exact("fill bf16", await ob.read(), new Array(n).fill(refBf16Bits(Math.fround(0.1))));
    }
  });

  t("copy at offsets for every dtype", async (c) => {
    const r = new Rng(2);
    for (const n of [1, 13, c.large(1000)]) {
      const f = r.f32(n);
      const o = c.output(n);
      c.be.copy(c.input(f), o.view, n);
      c.exact("copy f32", await o.read(), Float64Array.from(f));
      await o.checkGuards();
      const h = Uint16Array.from({ length: n }, () => r.int(0, 65536));
      const oh = c.output(n, "bf16");
      c.be.copy(c.input(h, "bf16"), oh.view, n);
      c.exact("copy bf16", await oh.read(), Float64Array.from(h));
      const i = r.i32(n, -100, 100);
      const oi = c.output(n, "i32");
      c.be.copy(c.input(i, "i32"), oi.view, n);
      c.exact("copy i32", await oi.read(), Float64Array.from(i));
    }
  });

  t("cast bit patterns exact: f32 → f16/bf16 (ties, subnormals, overflow, inf, NaN) and back", async (c) => {
    const r = new Rng(3);
    const edge = [0, -0, 1, -1, 65504, 65519.99, 65520, -65520, 1e6, 2 ** -24, 2 ** -25, 3 * 2 ** -25, 2 ** -14 - 2 ** -26, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 2 ** -130, 3.4028234663852886e38, 1e-45, Infinity, -Infinity, NaN];
    const rnd = Array.from({ length: c.large(997, 50) }, () => r.uniform(-4, 4) * 2 ** r.int(-30, 20));
    const xs = Float32Array.from([...edge, ...rnd]);
    const n = xs.length;
    const src = c.input(xs);
    const isNaN16 = (h: number, e: number, m: number) => (h & e) === e && (h & m) !== 0;
    for (const [d, ref, eMask, mMask] of [["f16", refF16Bits, 0x7c00, 0x3ff], ["bf16", refBf16Bits, 0x7f80, 0x7f]] as const) {
      const o = c.output(n, d);
      c.be.cast(src, o.view, n);
      const got = await o.read();
      const want = Array.from(xs, (x) => ref(x));
      // NaN: any NaN pattern is acceptable; everything else bit-exact
      const gotN = Array.from(got, (h, i) => (Number.isNaN(xs[i]!) ? (isNaN16(h, eMask, mMask) ? -1 : h) : h));
      const wantN = want.map((h, i) => (Number.isNaN(xs[i]!) ? -1 : h));
      c.exact(`cast f32→${d}`, gotN, wantN);
      await o.checkGuards();
    }
    // 16-bit → f32 over all 65536 patterns (exact values; NaN stays NaN)
    const all = Uint16Array.from({ length: 65536 }, (_, i) => i);
    for (const [d, val] of [["f16", refF16Value], ["bf16", refBf16Value]] as const) {
      const o = c.output(65536);
      c.be.cast(c.input(all, d), o.view, 65536);
      const got = await o.read();
      c.exact(`cast ${d}→f32`, Array.from(got, (v) => (Number.isNaN(v) ? -999 : v)), Array.from(all, (h) => (Number.isNaN(val(h)) ? -999 : val(h))));
    }
    // f16 → bf16 and bf16 → f16 go through the exact value
    const hs = Uint16Array.from({ length: c.large(2000, 100) }, () => r.int(0, 65536));
    const o1 = c.output(hs.length, "bf16");
    c.be.cast(c.input(hs, "f16"), o1.view, hs.length);
    c.exact("cast f16→bf16", Array.from(await o1.read(), (h, i) => (Number.isNaN(refF16Value(hs[i]!)) ? -1 : h)), Array.from(hs, (h) => (Number.isNaN(refF16Value(h)) ? -1 : refBf16Bits(refF16Value(h)))));
    const o2 = c.output(hs.length, "f16");
    c.be.cast(c.input(hs, "bf16"), o2.view, hs.length);
    c.exact("cast bf16→f16", Array.from(await o2.read(), (h, i) => (Number.isNaN(refBf16Value(hs[i]!)) ? -1 : h)), Array.from(hs, (h) => (Number.isNaN(refBf16Value(h)) ? -1 : refF16Bits(refBf16Value(h)))));
  });
}
