/** Conformance: adamw (decoupled or L2, 16-bit grads, param16 copies), sumSquares, nonFinite. */

import type { AdamWParams, DType, LambParams } from "../../src/backend.ts";
import { refBf16Bits, refBf16Value, refF16Bits, refF16Value } from "../reference/cast.ts";
import { refAdamw } from "../reference/optim.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the optimizer-side tests. */
export function optimTests(t: T): void {
  const configs: { decoupled: boolean; grad: DType; p16: DType | null; step: number }[] = [
    { decoupled: true, grad: "f32", p16: null, step: 1 },
    { decoupled: false, grad: "f32", p16: null, step: 7 },
    { decoupled: true, grad: "f32", p16: "bf16", step: 3 },
    { decoupled: true, grad: "bf16", p16: "bf16", step: 11 },
    { decoupled: false, grad: "f16", p16: "f16", step: 2 },
    { decoupled: true, grad: "f16", p16: "f16", step: 1000 },
  ];
  for (const cfg of configs) {
    t(`adamw decoupled=${cfg.decoupled} grad=${cfg.grad} param16=${cfg.p16 ?? "none"} step=${cfg.step}`, async (c) => {
      const r = new Rng(1100 + configs.indexOf(cfg));
      for (const n of [1, 7, 61, c.large(4099, 5)]) {
        const hp: AdamWParams = { lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, decoupled: cfg.decoupled, step: cfg.step, gradScale: 0.5 };
        const p0 = r.f32(n);
        const m0 = r.f32(n, -0.1, 0.1);
        const v0 = r.f32(n, 0, 0.01);
        const g32 = r.f32(n, -2, 2);
        let gView;
        let gVals: ArrayLike<number>;
        if (cfg.grad === "f32") {
          gView = c.input(g32);
          gVals = g32;
        } else {
          const enc = cfg.grad === "f16" ? refF16Bits : refBf16Bits;
          const dec = cfg.grad === "f16" ? refF16Value : refBf16Value;
          const bits = Uint16Array.from(g32, enc);
          gView = c.input(bits, cfg.grad);
          gVals = Array.from(bits, dec);
        }
        const p = c.output(n, "f32", p0);
        const m = c.output(n, "f32", m0);
        const v = c.output(n, "f32", v0);
        const p16 = cfg.p16 ? c.output(n, cfg.p16) : null;
        c.be.adamw(p.view, gView, m.view, v.view, p16 ? p16.view : null, n, hp);
        const ref = refAdamw(p0, gVals, m0, v0, hp);
        const label = `adamw n=${n}`;
        const got = await p.read();
        // update = lr·m̂/(√v̂+eps): a few f32 roundings on a quantity ≈ lr; relative to |p| + lr
        c.close(`${label} param`, got, ref.param, { factor: 4, mag: new Array(n).fill(hp.lr) });
        c.close(`${label} m`, await m.read(), ref.m, { factor: 2 });
        c.close(`${label} v`, await v.read(), ref.v, { factor: 2 });
        if (p16) {
          // the 16-bit copy is the backend's own new f32 param rounded to nearest even, bit-exact
          const enc = cfg.p16 === "f16" ? refF16Bits : refBf16Bits;
          c.exact(`${label} param16 (${cfg.p16})`, await p16.read(), Array.from(got, enc));
          await p16.checkGuards();
        }
        await p.checkGuards();
        await m.checkGuards();
        await v.checkGuards();
      }
    });
  }

  for (const cfg of [
    { grad: "f32" as DType, inside: false, wd: 0.01 },
    { grad: "bf16" as DType, inside: true, wd: 0.3 },
    { grad: "f16" as DType, inside: false, wd: 0 },
  ]) {
    t(`lambUpdate grad=${cfg.grad} eps_inside_sqrt=${cfg.inside} wd=${cfg.wd}`, async (c) => {
      const r = new Rng(1150);
      for (const n of [1, 7, 61, c.large(4099, 5)]) {
        const hp: LambParams = { beta1: 0.9, beta2: 0.999, eps: cfg.inside ? 1e-6 : 1e-8, epsInsideSqrt: cfg.inside, weightDecay: cfg.wd, gradScale: 0.5 };
        const p0 = r.f32(n);
        const m0 = r.f32(n, -0.1, 0.1);
        const v0 = r.f32(n, 0, 0.01);
        const g32 = r.f32(n, -2, 2);
        let gView;
        let gVals: ArrayLike<number> = g32;
        if (cfg.grad === "f32") gView = c.input(g32);
        else {
          const bits = Uint16Array.from(g32, cfg.grad === "f16" ? refF16Bits : refBf16Bits);
          gView = c.input(bits, cfg.grad);
          gVals = Array.from(bits, cfg.grad === "f16" ? refF16Value : refBf16Value);
        }
        const p = c.output(n, "f32", p0);
        const m = c.output(n, "f32", m0);
        const v = c.output(n, "f32", v0);
        const u = c.output(n, "f32");
        c.be.lambUpdate(p.view, gView, m.view, v.view, u.view, n, hp);
        // float64 reference (DeepSpeed FusedLamb lamb_cuda_kernel_part1)
        const rm = new Array<number>(n);
        const rv = new Array<number>(n);
        const ru = new Array<number>(n);
        for (let i = 0; i < n; i++) {
          const g = gVals[i]! * hp.gradScale;
          rm[i] = hp.beta1 * m0[i]! + (1 - hp.beta1) * g;
          rv[i] = hp.beta2 * v0[i]! + (1 - hp.beta2) * g * g;
          const den = cfg.inside ? Math.sqrt(rv[i]! + hp.eps) : Math.sqrt(rv[i]!) + hp.eps;
          ru[i] = rm[i]! / den + hp.weightDecay * p0[i]!;
        }
        const label = `lambUpdate n=${n}`;
        c.exact(`${label} param unchanged`, await p.read(), p0);
        c.close(`${label} m`, await m.read(), rm, { factor: 2 });
        c.close(`${label} v`, await v.read(), rv, { factor: 2 });
        c.close(`${label} update`, await u.read(), ru, { factor: 8 });
        for (const b of [p, m, v, u]) await b.checkGuards();
      }
    });
  }

  t("sumSquares over f32, f16 and bf16", async (c) => {
    const r = new Rng(1200);
    for (const n of [1, 13, 1000, c.large(65537, 10)]) {
      const x = r.f32(n, -3, 3);
      const want = x.reduce((s, v) => s + v * v, 0);
      const out = c.output(1);
      c.be.sumSquares(c.input(x), out.view, n);
      // a sum of positive terms: relative bound scaled by log2(n) for pairwise/workgroup f32 sums
      c.close(`sumSquares f32 n=${n}`, await out.read(), [want], { factor: 2 + Math.log2(n) });
      await out.checkGuards();
      for (const [d, enc, dec] of [["f16", refF16Bits, refF16Value], ["bf16", refBf16Bits, refBf16Value]] as const) {
        const bits = Uint16Array.from(x, enc);
        const w = Array.from(bits, dec).reduce((s, v) => s + v * v, 0);
        const o = c.output(1);
        c.be.sumSquares(c.input(bits, d), o.view, n);
        c.close(`sumSquares ${d} n=${n}`, await o.read(), [w], { factor: 2 + Math.log2(n) });
      }
    }
  });

  t("nonFinite detects inf and NaN anywhere (f32, f16, bf16)", async (c) => {
    const r = new Rng(1300);
    for (const n of [1, 17, c.large(10007, 20)]) {
      const cases: [string, number, number][] = [["finite", -1, 0], ["+inf", r.int(0, n), Infinity], ["-inf", n - 1, -Infinity], ["NaN", 0, NaN], ["NaN mid", Math.floor(n / 2), NaN]];
      for (const [what, pos, val] of cases) {
        const x = r.f32(n, -1000, 1000);
        x[0] = 3e38; // large but finite f32 (overflows f16 when cast, so only used for f32)
        if (pos >= 0) x[pos] = val;
        const out = c.output(1, "u32");
        c.be.nonFinite(c.input(x), out.view, n);
        c.exact(`nonFinite f32 ${what} n=${n}`, await out.read(), [pos >= 0 ? 1 : 0]);
        await out.checkGuards();
        for (const [d, enc] of [["f16", refF16Bits], ["bf16", refBf16Bits]] as const) {
          const bits = Uint16Array.from(x, (v, i) => (i === 0 && pos !== 0 ? enc(d === "f16" ? 65504 : 3e38) : enc(v)));
          const o = c.output(1, "u32");
          c.be.nonFinite(c.input(bits, d), o.view, n);
          c.exact(`nonFinite ${d} ${what} n=${n}`, await o.read(), [pos >= 0 ? 1 : 0]);
        }
      }
    }
  });
}
