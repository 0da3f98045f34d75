/**
 * `groupedSwiGLU`: every listed expert's SwiGLU feed-forward y = W2 · (silu(W1 x) ⊙ W3 x) on its
 * rows, as ONE differentiable op (Mixtral `MixtralBlockSparseTop2MLP`, models/llama.ts `swiglu`),
 * with the three grouped products of grouped-weights.ts — so that what the backward keeps is
 * chosen here rather than by three separate ops:
 *
 * - kept for the backward: the gate and up projections h = W1 x and u = W3 x (2·I per row), in
 *   `saved` dtype — f32, or bf16/f16 in a 16-bit job (PyTorch autocast keeps them in the compute
 *   dtype too), cast back to f32 when the backward reads them;
 * - not kept: the activation a = silu(h) ⊙ u (I per row), recomputed in the backward from h and u
 *   (one elementwise kernel) for W2's gradient; x is the dispatcher's tensor (kept by its op).
 *
 * At Mixtral-8x7B's layer (top-2, I = 14336) and 8192 tokens that is 0.94e9 bytes of h, u in bf16
 * instead of 2.82e9 of h, u, a in f32 (separate groupedLinear + siluMul ops) per layer.
 *
 * Numerics: the forward is the f32 composition's (the same kernels in the same order: y's bits
 * do not depend on `saved`). With `saved` f32 the gradients are those of
 * groupedLinear(siluMul(groupedLinear(x, W1), groupedLinear(x, W3)), W2) bit for bit on the cpu
 * backend (the recomputed a is the same kernel on the same inputs); with bf16/f16 the backward
 * reads h and u rounded to the 16-bit type (relative error ≤ 2⁻⁹ / 2⁻¹² per element), as a
 * 16-bit autocast backward does — core/test/nn/grouped-swiglu.test.ts states the tolerances.
 */
import type { Backend, Buf, DType, View } from "@zeromoe/kernels";
import { accumulateGrad, isGradEnabled, record } from "../../tensor/index.ts";
import { empty, uninit, type Tensor } from "../../tensor/tensor.ts";
import { convert, groupedMemory, groupedProduct, groupedWeightGrads } from "./grouped-weights.ts";

/** The listed experts' weights, each G tensors: w1 (gate) and w3 (up) [I, H], w2 (down) [H, I]. */
export interface SwiGLUWeights {
  w1: readonly Tensor[];
  w2: readonly Tensor[];
  w3: readonly Tensor[];
}

/**
 * y f32 [R, H] = W2_g (silu(W1_g x) ⊙ W3_g x) for the rows of each group g (see the module
 * comment); x f32 [R, H] grouped by rows, offsets i32 [G + 1] on the device (rows past offsets[G]
 * give zeros), `rowsPerGroup` the groups' row counts when the host knows them (a group without rows
 * then gets no gradient contribution) or null. `saved`: dtype of the kept h and u (f32, bf16,
 * f16). `stackBytes`: the weight stack budget (grouped-weights.ts).
 * @throws on shape or dtype mismatches (naming the tensors), or `saved` not f32/bf16/f16.
 */
export function groupedSwiGLU(x: Tensor, w: SwiGLUWeights, offsets: Tensor, rowsPerGroup: ArrayLike<number> | null, saved: DType, stackBytes = groupedMemory.stackBytes): Tensor {
  const G = w.w1.length;
  if (x.ndim !== 2 || x.dtype !== "f32") throw new Error(`groupedSwiGLU: x must be f32 [rows, hidden], got ${x}`);
  if (G === 0 || w.w2.length !== G || w.w3.length !== G) throw new Error(`groupedSwiGLU: ${w.w1.length} gate, ${w.w2.length} down and ${w.w3.length} up weights (expected the same number ≥ 1)`);
  if (saved !== "f32" && saved !== "bf16" && saved !== "f16") throw new Error(`groupedSwiGLU: saved dtype must be f32, bf16 or f16, got ${saved}`);
  const [I, H] = w.w1[0]!.shape as [number, number];
  const check = (ts: readonly Tensor[], rows: number, cols: number, what: string) => {
    for (const t of ts) if (t.ndim !== 2 || t.shape[0] !== rows || t.shape[1] !== cols || t.dtype !== "f32") throw new Error(`groupedSwiGLU: every ${what} weight must be f32 [${rows}, ${cols}], got ${t}`);
  };
  check(w.w1, I, H, "gate");
  check(w.w3, I, H, "up");
  check(w.w2, H, I, "down");
  if (x.shape[1] !== H) throw new Error(`groupedSwiGLU: x ${x} has ${x.shape[1]} features, the weights expect ${H}`);
  if (offsets.dtype !== "i32" || offsets.numel !== G + 1) throw new Error(`groupedSwiGLU: offsets must be i32 [${G + 1}], got ${offsets}`);
  if (rowsPerGroup && rowsPerGroup.length !== G) throw new Error(`groupedSwiGLU: ${rowsPerGroup.length} row counts for ${G} groups`);
  const R = x.shape[0]!;
  const be = x.be;
  const n = R * I;
  const y = empty(be, [R, H]);
  const inputs = [x, ...w.w1, ...w.w2, ...w.w3];
  const recording = isGradEnabled() && inputs.some((t) => t.requiresGrad);
  if (R === 0 || H === 0 || I === 0) return recording ? record("groupedSwiGLU", inputs, y, () => {}) : y;
  // forward in f32: h, u (rows past the groups stay 0), a = silu(h) ⊙ u, y = W2 a
  const h = empty(be, [R, I]);
  const u = empty(be, [R, I]);
  groupedProduct(be, x.view, w.w1, rowsPerGroup, offsets.view, h.view, { R, N: I, K: H, transB: true, accumulate: false }, stackBytes);
  groupedProduct(be, x.view, w.w3, rowsPerGroup, offsets.view, u.view, { R, N: I, K: H, transB: true, accumulate: false }, stackBytes);
  const a = be.alloc("f32", n, "activation", "any"); // siluMul sets all n
  be.siluMul(h.view, u.view, { buf: a, off: 0 }, n);
  groupedProduct(be, { buf: a, off: 0 }, w.w2, rowsPerGroup, offsets.view, y.view, { R, N: H, K: I, transB: true, accumulate: false }, stackBytes);
  be.free(a);
  if (!recording) {
    h.dispose();
    u.dispose();
    return y;
  }
  // what the backward keeps: h and u in `saved` dtype — owned tensors of the current arena, so a
  // tape dropped without a backward (or a node that receives no gradient) frees them with the rest
  const keptH = keep(h, saved);
  const keptU = keep(u, saved);
  return record("groupedSwiGLU", inputs, y, (g) => {
    try {
      const needW = (ts: readonly Tensor[]) => ts.map((t, i) => t.requiresGrad && (!rowsPerGroup || rowsPerGroup[i]! > 0));
      const need1 = needW(w.w1);
      const need2 = needW(w.w2);
      const need3 = needW(w.w3);
      const needGate = x.requiresGrad || need1.some((b) => b) || need3.some((b) => b);
      // W2's gradient needs a again: recomputed from h, u
      if (need2.some((b) => b)) {
        const a2 = be.alloc("f32", n, "activation", "any");
        forChunks(be, [keptH, keptU], n, (c0, c, [hv, uv]) => be.siluMul(hv!, uv!, { buf: a2, off: c0 }, c));
        groupedWeightGrads(be, w.w2, need2, g.view, { buf: a2, off: 0 }, offsets.view, R, H, I, stackBytes);
        be.free(a2);
      }
      if (!needGate) return;
      // da = g · W2 (rows past the groups: 0); then dh, du in one kernel per chunk, dh written back
      // over the chunk of da it was computed from (da is not read again): two [R, I] buffers, not three
      const dh = be.alloc("f32", n, "activation");
      groupedProduct(be, g.view, w.w2, rowsPerGroup, offsets.view, { buf: dh, off: 0 }, { R, N: I, K: H, transB: false, accumulate: false }, stackBytes);
      const du = be.alloc("f32", n, "activation", "any"); // siluMulBackward sets all n
      const tmp = be.alloc("f32", Math.min(n, groupedMemory.chunkElements), "activation", "any");
      forChunks(be, [keptH, keptU], n, (c0, c, [hv, uv]) => {
        be.siluMulBackward(hv!, uv!, { buf: dh, off: c0 }, { buf: tmp, off: 0 }, { buf: du, off: c0 }, c);
        be.copy({ buf: tmp, off: 0 }, { buf: dh, off: c0 }, c);
      });
      be.free(tmp);
      keptH.dispose();
      keptU.dispose();
      // dx: W3's part, then W1's (the order of the separate ops' sweep); then both dW
      accumulateGrad(x, (dst, acc) => groupedProduct(be, { buf: du, off: 0 }, w.w3, rowsPerGroup, offsets.view, dst, { R, N: H, K: I, transB: false, accumulate: acc }, stackBytes), true);
      accumulateGrad(x, (dst, acc) => groupedProduct(be, { buf: dh, off: 0 }, w.w1, rowsPerGroup, offsets.view, dst, { R, N: H, K: I, transB: false, accumulate: acc }, stackBytes), true);
      if (need3.some((b) => b)) groupedWeightGrads(be, w.w3, need3, { buf: du, off: 0 }, x.view, offsets.view, R, I, H, stackBytes);
      if (need1.some((b) => b)) groupedWeightGrads(be, w.w1, need1, { buf: dh, off: 0 }, x.view, offsets.view, R, I, H, stackBytes);
      be.free(dh);
      be.free(du);
    } finally {
      keptH.dispose();
      keptU.dispose();
    }
  });
}

/** `t` (f32) as the backward keeps it in `dtype`: `t` itself for f32, else a 16-bit copy (an owned
 * tensor of the current arena) and `t` freed. */
function keep(t: Tensor, dtype: DType): Tensor {
  if (dtype === "f32") return t;
  const k = uninit(t.be, t.shape, dtype); // the cast sets every element
  t.be.cast(t.view, k.view, t.numel);
  t.dispose();
  return k;
}

/** Run `fn(c0, c, views)` over [0, n) in chunks of at most `groupedMemory.chunkElements` elements (grouped-weights.ts), `views` the
 * chunk of each of `kept` in f32 (their own views when f32, else a cast into a chunk-sized
 * temporary, freed at the end). @throws when a kept tensor was freed already. */
function forChunks(be: Backend, kept: readonly Tensor[], n: number, fn: (c0: number, c: number, views: View[]) => void): void {
  const CHUNK = groupedMemory.chunkElements;
  const temps: (Buf | null)[] = kept.map((k) => (k.dtype === "f32" ? null : be.alloc("f32", Math.min(n, groupedMemory.chunkElements), "activation", "any")));
  try {
    for (let c0 = 0; c0 < n; c0 += CHUNK) {
      const c = Math.min(CHUNK, n - c0);
      const views = kept.map((k, i) => {
        const v = k.view;
        const t = temps[i];
        if (!t) return { buf: v.buf, off: v.off + c0 };
        convert(be, { buf: v.buf, off: v.off + c0 }, { buf: t, off: 0 }, c);
        return { buf: t, off: 0 };
      });
      fn(c0, c, views);
    }
  } finally {
    for (const t of temps) if (t) be.free(t);
  }
}
