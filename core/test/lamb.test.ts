/**
 * LAMB (optimizer.type "Lamb", DeepSpeed FusedLamb; core/src/optim/lamb-step.ts):
 * - the device composition (backend lambUpdate + per-piece sumSquares + summed partials + axpy) on
 *   one flat buffer of tensors with prime lengths, cut into shards at world sizes 1–4 (the cuts go
 *   through tensors), against an independent float64 reference of DeepSpeed's formulas over 3 steps;
 * - the trust-ratio clamp and its zero-norm rule;
 * - DeepSpeed's key names and defaults are accepted, unknown keys and misuse refused.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, type Buf, type LambParams } from "@zeromoe/kernels";
import { DEFAULT_JOB, resolveJobConfig } from "../src/config/index.ts";
import { lambApply, lambPartials, lambPieces, lambStepSize, trustRatio } from "../src/optim/lamb-step.ts";

/** Deterministic random numbers in [-1, 1) (LCG; independent of the engine's generators). */
function rand(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  };
}

const SEGS = [7, 13, 31, 2, 97, 5, 61]; // prime tensor lengths; total 216
const TOTAL = SEGS.reduce((a, b) => a + b, 0);
const segments = SEGS.map((numel, i) => ({ numel, offset: SEGS.slice(0, i).reduce((a, b) => a + b, 0) }));

interface Hyper { lr: number; b1: number; b2: number; eps: number; wd: number; gradScale: number; bias: boolean; inside: boolean; minC: number; maxC: number }

/** Float64 reference of DeepSpeed FusedLamb's step (fused_lamb_cuda_kernel.cu parts 1–3), whole tensors. */
function referenceStep(p: Float64Array, g: Float64Array, m: Float64Array, v: Float64Array, t: number, h: Hyper): void {
  const stepSize = h.bias ? (h.lr * Math.sqrt(1 - h.b2 ** t)) / (1 - h.b1 ** t) : h.lr;
  for (const s of segments) {
    const u = new Float64Array(s.numel);
    let w2 = 0;
    let u2 = 0;
    for (let i = 0; i < s.numel; i++) {
      const j = s.offset + i;
      const gi = g[j]! * h.gradScale;
      m[j] = h.b1 * m[j]! + (1 - h.b1) * gi;
      v[j] = h.b2 * v[j]! + (1 - h.b2) * gi * gi;
      const den = h.inside ? Math.sqrt(v[j]! + h.eps) : Math.sqrt(v[j]!) + h.eps;
      u[i] = m[j]! / den + h.wd * p[j]!;
      w2 += p[j]! * p[j]!;
      u2 += u[i]! * u[i]!;
    }
    let r = 1;
    if (w2 > 0 && u2 > 0) r = Math.min(h.maxC, Math.max(h.minC, Math.sqrt(w2) / Math.sqrt(u2)));
    for (let i = 0; i < s.numel; i++) p[s.offset + i] = p[s.offset + i]! - stepSize * r * u[i]!;
  }
}

/** Shard ranges of TOTAL over `world` ranks as ZeRO cuts them (ceil(numel/world) per rank, the last short). */
function shards(world: number): [number, number][] {
  const size = Math.ceil(TOTAL / world);
  return Array.from({ length: world }, (_, r) => [Math.min(TOTAL, r * size), Math.max(0, Math.min(TOTAL, (r + 1) * size) - Math.min(TOTAL, r * size))] as [number, number]);
}

/** Run `steps` LAMB steps on the cpu backend with the buffer split over `world` simulated ranks;
 * partial sums of squares are summed over ranks in f64 as the engine's all_reduce does. */
async function deviceRun(world: number, h: Hyper, p0: Float64Array, grads: Float64Array[]): Promise<Float64Array> {
  const be = new CpuBackend();
  const ranks = shards(world).map(([start, n]) => {
    const pieces = lambPieces(segments, start, n);
    const buf = (x: Float64Array) => {
      const b = be.alloc("f32", Math.max(1, n), "other");
      if (n > 0) be.write({ buf: b, off: 0 }, Float32Array.from(x.subarray(start, start + n)));
      return b;
    };
    return { start, n, pieces, p: buf(p0), g: buf(new Float64Array(TOTAL)), m: buf(new Float64Array(TOTAL)), v: buf(new Float64Array(TOTAL)), sums: be.alloc("f32", Math.max(1, 2 * pieces.length), "other") };
  });
  const hp: LambParams = { beta1: h.b1, beta2: h.b2, eps: h.eps, epsInsideSqrt: h.inside, weightDecay: h.wd, gradScale: h.gradScale };
  for (let t = 1; t <= grads.length; t++) {
    const tot = new Float64Array(2 * SEGS.length);
    const upds: (Buf | null)[] = [];
    for (const r of ranks) {
      if (r.n > 0) be.write({ buf: r.g, off: 0 }, Float32Array.from(grads[t - 1]!.subarray(r.start, r.start + r.n)));
      const range = { master: { buf: r.p, off: 0 }, grad: { buf: r.g, off: 0 }, m: { buf: r.m, off: 0 }, v: { buf: r.v, off: 0 }, n: r.n, pieces: r.pieces };
      upds.push(lambPartials(be, range, hp, { buf: r.sums, off: 0 }));
      const s = await be.read({ buf: r.sums, off: 0 }, 2 * r.pieces.length);
      r.pieces.forEach((pc, k) => {
        tot[2 * pc.tensor] += s[2 * k]!;
        tot[2 * pc.tensor + 1] += s[2 * k + 1]!;
      });
    }
    const ratios = SEGS.map((_, i) => trustRatio(tot[2 * i]!, tot[2 * i + 1]!, h.minC, h.maxC));
    const stepSize = lambStepSize(h.lr, h.b1, h.b2, t, h.bias);
    ranks.forEach((r, i) => {
      const range = { master: { buf: r.p, off: 0 }, grad: { buf: r.g, off: 0 }, m: { buf: r.m, off: 0 }, v: { buf: r.v, off: 0 }, n: r.n, pieces: r.pieces };
      if (upds[i]) lambApply(be, range, upds[i]!, ratios, stepSize);
    });
  }
  const out = new Float64Array(TOTAL);
  for (const r of ranks) if (r.n > 0) out.set(await be.read({ buf: r.p, off: 0 }, r.n), r.start);
  return out;
}

function maxRelErr(a: Float64Array, ref: Float64Array): number {
  let scale = 0;
  for (const x of ref) scale = Math.max(scale, Math.abs(x));
  let e = 0;
  for (let i = 0; i < a.length; i++) e = Math.max(e, Math.abs(a[i]! - ref[i]!));
  return e / scale;
}

const BASE: Hyper = { lr: 2e-2, b1: 0.9, b2: 0.999, eps: 1e-8, wd: 0.01, gradScale: 0.37, bias: true, inside: false, minC: 0.01, maxC: 10 };

describe("LAMB step vs float64 reference", () => {
  const cases: [string, Hyper, boolean][] = [
    ["defaults (bias correction, eps outside sqrt)", BASE, false],
    ["no bias correction, eps inside sqrt, large wd", { ...BASE, bias: false, inside: true, eps: 1e-6, wd: 0.3 }, false],
    ["trust ratio clamped above (max_coeff 0.3)", { ...BASE, maxC: 0.3 }, false],
    ["trust ratio clamped below (min_coeff 5), one all-zero tensor (ratio 1)", { ...BASE, minC: 5, maxC: 10, wd: 0 }, true],
  ];
  for (const [name, h, zeroSeg] of cases) {
    for (const world of [1, 2, 3, 4]) {
      test(`${name}, world ${world}`, async () => {
        const rnd = rand(17 + world);
        const p0 = Float64Array.from({ length: TOTAL }, () => rnd() * 0.5);
        if (zeroSeg) p0.fill(0, segments[3]!.offset, segments[3]!.offset + segments[3]!.numel);
        // f32-representable inputs so the reference starts from the device's values
        const f32 = (x: Float64Array) => Float64Array.from(Float32Array.from(x));
        const p0r = f32(p0);
        const grads = [0, 1, 2].map(() => f32(Float64Array.from({ length: TOTAL }, () => rnd() * 3)));
        const ref = Float64Array.from(p0r);
        const m = new Float64Array(TOTAL);
        const v = new Float64Array(TOTAL);
        grads.forEach((g, i) => referenceStep(ref, g, m, v, i + 1, h));
        const got = await deviceRun(world, h, p0r, grads);
        // f32 arithmetic on the device vs f64: 3 steps of lr 2e-2 stay within 2e-6 of max |p|
        expect(maxRelErr(got, ref)).toBeLessThan(2e-6);
        // every tensor moved (an all-zero one too: its trust ratio is 1)
        for (const s of segments) expect(got.subarray(s.offset, s.offset + s.numel)).not.toEqual(p0r.subarray(s.offset, s.offset + s.numel));
      });
    }
  }

  test("pieces cut tensors at shard boundaries", () => {
    expect(lambPieces(segments, 10, 30)).toEqual([
      { tensor: 1, start: 0, count: 10 },
      { tensor: 2, start: 10, count: 20 },
    ]);
    expect(lambPieces(segments, 0, 0)).toEqual([]);
  });

  test("trust ratio: clamp and zero norms", () => {
    expect(trustRatio(4, 1, 0.01, 10)).toBe(2);
    expect(trustRatio(400, 1, 0.01, 10)).toBe(10);
    expect(trustRatio(1, 1e8, 0.01, 10)).toBe(0.01);
    expect(trustRatio(0, 1, 0.01, 10)).toBe(1);
    expect(trustRatio(1, 0, 0.01, 10)).toBe(1);
  });
});

describe("Lamb config (DeepSpeed's names)", () => {
  test("accepted with DeepSpeed's keys; defaults of FusedLamb filled", () => {
    const c = resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "Lamb", params: { lr: 1e-3, weight_decay: 0.01, bias_correction: false, max_coeff: 0.3, min_coeff: 0.01 } } }).config.optimizer;
    expect(c.type).toBe("Lamb");
    expect(c.params).toMatchObject({ lr: 1e-3, weight_decay: 0.01, bias_correction: false, max_coeff: 0.3, min_coeff: 0.01, max_grad_norm: 0, eps_inside_sqrt: false, betas: [0.9, 0.999], eps: 1e-8 });
    const d = resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "lamb" } }).config.optimizer;
    expect(d.type).toBe("Lamb");
    expect(d.params).toMatchObject({ bias_correction: true, max_grad_norm: 0, max_coeff: 10, min_coeff: 0.01, eps_inside_sqrt: false });
  });
  test("unknown keys and misuse are refused naming the field", () => {
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "Lamb", params: { max_coef: 1 } } })).toThrow(/optimizer.params.max_coef: unknown key/);
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "Lamb", params: { min_coeff: 2, max_coeff: 1 } } })).toThrow(/optimizer.params.min_coeff: min_coeff \(2\) must not exceed max_coeff \(1\)/);
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "AdamW", params: { max_coeff: 1 } } })).toThrow(/optimizer.params.max_coeff: max_coeff is a Lamb parameter/);
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "Lamb", params: { max_coeff: -1 } } })).toThrow(/optimizer.params.max_coeff/);
    expect(() => resolveJobConfig({ ...DEFAULT_JOB, optimizer: { type: "Lamb" }, zero_optimization: { stage: 2, offload_optimizer: { device: "cpu" } } })).toThrow(/zero_optimization.offload_optimizer.device: optimizer.type "Lamb" runs on the device only/);
  });
});
