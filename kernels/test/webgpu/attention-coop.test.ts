/**
 * The tensor-core attention (wgsl/attention-coop.ts) against a float64 reference
 * (test/reference/transformer.ts) on random data: forward out and lse, and dq, dk, dv of the
 * backward, at sequence lengths 1, 17, 131 and 257 (one token, mid-fragment, several blocks ending
 * mid-block), head dims 64 and 128, grouped-query ratios 1, 4 and 8, batch 3, causal and not; one
 * case with tensors of very different magnitudes (the power-of-two scaling); two cases with other
 * blocks and two compiled with naga's runtime checks; block checks and the kernel selection.
 *
 * Two suites: "emulated" (the same kernels with plain-WGSL cooperative matrices, any device with
 * shader-f16: lavapipe here) and "real" (the wgpu-cooperative-matrix feature: ZEROMOE_WGPU=coop on
 * a GPU with it; skipped elsewhere, naming why).
 *
 * Tolerances, from f16 rounding of the operands: every product operand (q, k, v, dout after their
 * exact power-of-two scaling; P and dS) is rounded to f16, relative error u = 2^−11, products are
 * exact and summed in f32. A score s = scale·q·k then errs by ≲ 2u·scale·Σ|q_d k_d| (≈ 2u·√D/4·…
 * for inputs uniform in [−1, 1], i.e. ≈ 1e-3 of a unit score at worst), which perturbs every P
 * relatively by about that, and out = Σ P v by that times max|v| plus u for v and for P: a few u of
 * max|out|. lse errs by the score error, absolutely. The gradients chain two or three such
 * products (dP = dO·Vᵀ, dS = P ⊙ (dP − Δ) rounded, dS·K), so their bound is a few times larger. The
 * checks: max |got − want| ≤ tol · max |want| per tensor with tol = 8u ≈ 3.9e-3 for out and lse, 16u
 * ≈ 7.8e-3 for dv, and 24u ≈ 1.2e-2 for dq and dk, where the scale is max |want| or, if larger, a
 * quarter of one term's size (out: max |v|; lse: 1; dv: max |dO|; dq, dk: scale·max|dO|·max|v|·√D
 * times max |k| or |q|), since where terms cancel (one key: dq = dk = 0 exactly, while dP − Δ
 * keeps the rounding of dP) the error stays at the terms' scale. A wrong mask or missed block moves
 * a short row (row 0 has one key) by O(1) of that scale, far outside these.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { View } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { randomF32 as rand } from "../../src/testing.ts";
import { coopSupport } from "../../src/wgsl/matmul-coop.ts";
import { COOP_ATTN_DEFAULT_BLOCKS, coopAttnBlockProblem, coopAttnBytes, type CoopAttnBlocks } from "../../src/wgsl/attention-coop.ts";
import { refAttention, refAttentionBackward } from "../reference/transformer.ts";

const adapter = await createGPU().requestAdapter();
const real = adapter ? coopSupport(adapter) : { ok: false, reason: "no adapter" };
const emulatable = !!adapter?.features.has("shader-f16");

const U = 2 ** -11;

interface Case {
  B: number;
  S: number;
  H: number;
  Hkv: number;
  D: number;
  causal: boolean;
  /** Magnitudes of q, k, v, dout (default 1). */
  mag?: [number, number, number, number];
}

const CASES: Case[] = [
  { B: 3, S: 1, H: 8, Hkv: 1, D: 64, causal: true },
  { B: 3, S: 17, H: 4, Hkv: 4, D: 128, causal: false },
  { B: 3, S: 17, H: 8, Hkv: 1, D: 64, causal: true },
  { B: 3, S: 131, H: 8, Hkv: 2, D: 64, causal: true },
  { B: 3, S: 131, H: 4, Hkv: 1, D: 128, causal: false },
  { B: 3, S: 257, H: 4, Hkv: 4, D: 128, causal: true },
  { B: 3, S: 257, H: 8, Hkv: 1, D: 64, causal: false },
  { B: 3, S: 131, H: 4, Hkv: 1, D: 64, causal: true, mag: [2 ** 6, 2 ** -5, 2 ** 12, 2 ** -22] },
];

/** max |got − want| ≤ tol · max(max |want|, floor) as "ok", else a message naming the worst element. */
function check(name: string, got: Float32Array, want: Float64Array, tol: number, floor = 0): string {
  let m = floor;
  let e = 0;
  let at = 0;
  for (let i = 0; i < want.length; i++) {
    m = Math.max(m, Math.abs(want[i]!));
    const d = Math.abs(got[i]! - want[i]!);
    if (!(d <= e)) {
      e = Number.isNaN(d) ? Infinity : d;
      at = i;
    }
  }
  return e <= tol * m ? "ok" : `${name}: max error ${e.toExponential(3)} at [${at}] (got ${got[at]}, want ${want[at]}) = ${(e / m).toExponential(3)} of max(max |want|, floor) ${m.toExponential(3)} > ${tol.toExponential(3)}`;
}

async function runCase(be: WebGpuBackend, c: Case, seed: number): Promise<void> {
  const { B, S, H, Hkv, D, causal } = c;
  const mag = c.mag ?? [1, 1, 1, 1];
  const nq = B * S * H * D;
  const nk = B * S * Hkv * D;
  const bufs: View[] = [];
  const put = (data: Float32Array): View => {
    const v = { buf: be.alloc("f32", data.length + 3, "other"), off: 3 };
    be.write(v, data);
    bufs.push(v);
    return v;
  };
  const scaled = (n: number, s: number, m: number) => rand(n, s).map((x) => x * m);
  const qh = scaled(nq, seed, mag[0]);
  const kh = scaled(nk, seed + 1, mag[1]);
  const vh = scaled(nk, seed + 2, mag[2]);
  const doh = scaled(nq, seed + 3, mag[3]);
  const q = put(qh), k = put(kh), v = put(vh), dout = put(doh);
  const out = put(new Float32Array(nq)), lse = put(new Float32Array(B * H * S));
  const dq = put(new Float32Array(nq)), dk = put(new Float32Array(nk)), dv = put(new Float32Array(nk));
  const scale = 1 / Math.sqrt(D);
  be.attention(q, k, v, out, lse, B, S, H, Hkv, D, scale, causal);
  be.attentionBackward(q, k, v, out, lse, dout, dq, dk, dv, B, S, H, Hkv, D, scale, causal);
  const got = await Promise.all(([[out, nq], [lse, B * H * S], [dq, nq], [dk, nk], [dv, nk]] as const).map(async ([view, n]) => Float32Array.from((await be.read(view, n)) as Float32Array)));
  for (const b of bufs) be.free(b.buf);
  const sh = { B, S, H, Hkv, D, scale, causal };
  const f = refAttention(qh, kh, vh, sh);
  const g = refAttentionBackward(qh, kh, vh, doh, sh);
  const amax = (x: Float32Array) => x.reduce((a, y) => Math.max(a, Math.abs(y)), 0);
  // the size of one term of dq = scale·Σ_j P_ij (dP_ij − Δ_i) k_j (Σ_j P_ij = 1, |dP| ≈ √D·|dO|·|v|):
  // where dP − Δ cancels (one key: dq = 0 exactly) the rounding of dP stays at this scale
  const gq = scale * amax(doh) * amax(vh) * Math.sqrt(D) * amax(kh);
  const gk = scale * amax(doh) * amax(vh) * Math.sqrt(D) * amax(qh);
  const msgs = [
    check("out", got[0]!, f.out, 8 * U, amax(vh) / 4),
    check("lse", got[1]!, f.lse, 8 * U, 1),
    check("dq", got[2]!, g.dq, 24 * U, gq / 4),
    check("dk", got[3]!, g.dk, 24 * U, gk / 4),
    check("dv", got[4]!, g.dv, 16 * U, amax(doh) / 4),
  ].filter((m) => m !== "ok");
  expect(msgs).toEqual([]);
}

/** One suite: the default blocks (compiled trusted, the default), `blocks`, or `checked` (the
 * default blocks compiled with naga's runtime checks); the latter two on two cases. */
function suite(kind: "emulated" | "real", skip: boolean, variant?: { blocks?: Partial<CoopAttnBlocks>; checked?: boolean }): void {
  describe(`attention on ${kind} tensor cores${variant?.blocks ? " (other blocks)" : variant?.checked ? " (compiled with runtime checks)" : ""}`, () => {
    let be: WebGpuBackend | null = null;
    beforeAll(async () => {
      if (skip) return;
      be = await WebGpuBackend.create(createGPU(), {
        tensorCores: kind === "emulated" ? "emulated" : true,
        ...(variant?.blocks ? { attentionCoopBlocks: variant.blocks } : {}),
        ...(variant?.checked ? { trustedShaders: [] } : {}),
      });
    });
    afterAll(() => be?.destroy());
    const cases = variant ? [CASES[3]!, CASES[4]!] : CASES;
    for (const c of cases) {
      const name = `B ${c.B}, S ${c.S}, H ${c.H}, Hkv ${c.Hkv}, D ${c.D}, ${c.causal ? "causal" : "full"}${c.mag ? ", mixed magnitudes" : ""}`;
      test.skipIf(skip)(name, async () => {
        expect(be!.attentionKernels(c.D)).toBe("coop");
        await runCase(be!, c, 11 * c.S + c.D + c.H);
      }, 600_000);
    }
  });
}

const OTHER_BLOCKS: Partial<CoopAttnBlocks> = { fwd: { sg: 2, kf: 2 }, dq: { sg: 1, kf: 1 }, dkv: { sg: 2, kf: 4 } };
suite("emulated", !emulatable);
suite("emulated", !emulatable, { blocks: OTHER_BLOCKS });
suite("emulated", !emulatable, { checked: true });
suite("real", !real.ok);
suite("real", !real.ok, { blocks: OTHER_BLOCKS });
suite("real", !real.ok, { checked: true });

describe("tensor-core attention: selection and refusals", () => {
  test("blocks: defaults fit 32 KiB; malformed blocks and blocks without tensor cores are refused by name", async () => {
    for (const k of ["fwd", "dq", "dkv"] as const) expect(coopAttnBytes(k, COOP_ATTN_DEFAULT_BLOCKS[k])).toBeLessThanOrEqual(32768);
    expect(coopAttnBlockProblem("fwd", { sg: 3, kf: 4 })).toMatch(/sg and kf must be 1, 2, 4 or 8, got 3, 4/);
    expect(coopAttnBlockProblem("dkv", { sg: 1, kf: 4 })).toMatch(/kf ≤ 2·sg/);
    if (!adapter) return;
    await expect(WebGpuBackend.create(createGPU(), { attentionCoopBlocks: { fwd: { sg: 2, kf: 2 } } })).rejects.toThrow(/attentionCoopBlocks needs tensorCores/);
    if (!emulatable) return;
    await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", attentionCoopBlocks: { dq: { sg: 2, kf: 3 } } })).rejects.toThrow(/attentionCoopBlocks.dq 2x3: sg and kf must be/);
    await expect(WebGpuBackend.create(createGPU(), { tensorCores: "emulated", attentionCoopBlocks: { fwd: { sg: 8, kf: 8 } } })).rejects.toThrow(/attentionCoopBlocks.fwd 8x8 needs \d+ bytes of workgroup memory/);
  });

  test("the FMA kernels run without tensor cores and at other head dims; non-causal attention is refused there by name", async () => {
    if (!adapter) return;
    const fma = await WebGpuBackend.create(createGPU());
    try {
      expect(fma.attentionKernels(64)).toBe("flash");
      const v = { buf: fma.alloc("f32", 64, "other"), off: 0 };
      expect(() => fma.attention(v, v, v, v, v, 1, 1, 1, 1, 64, 1, false)).toThrow(/webgpu attention: non-causal attention needs the tensor-core attention kernels/);
      fma.free(v.buf);
    } finally {
      fma.destroy();
    }
    if (!emulatable) return;
    const be = await WebGpuBackend.create(createGPU(), { tensorCores: "emulated" });
    try {
      expect([64, 128, 16].map((d) => be.attentionKernels(d))).toEqual(["coop", "coop", "coop"]);
      expect([40, 13, 256].map((d) => be.attentionKernels(d))).not.toContain("coop");
    } finally {
      be.destroy();
    }
  });
});

test("tensor-core attention: where a suite is skipped, the reason is named", () => {
  if (!emulatable) console.log("attention-coop: emulated tests skipped: the adapter lacks shader-f16");
  if (!real.ok) console.log(`attention-coop: real tensor-core tests skipped: ${real.reason}`);
  // coopSupport always names its verdict: why the real suite is skipped, or what the driver offers
  expect(real.reason).toMatch(/\S/);
});
