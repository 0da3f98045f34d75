/**
 * The fused LM head + loss: mean cross-entropy of `hidden · weightᵀ` against integer targets without
 * ever materialising the [tokens × vocab] logits (Wijmans et al. 2024, "Cut Your Losses in
 * Large-Vocabulary Language Models" — Apple's Cut Cross-Entropy; Hsu et al. 2024, Liger-Kernel's
 * fused linear cross-entropy).
 *
 * Algorithm. Tokens are cut into chunks and the vocabulary into tiles (linear-cross-entropy-plan.ts
 * chooses the sizes from the shapes and the device's binding limit). Forward, per chunk: for each
 * vocabulary tile, one product logits_tile = h_chunk · W_tileᵀ (the backend matmul, tensor cores
 * when enabled) and `crossEntropyTileStats` merges the tile into each row's f32 running (max,
 * Σexp, target logit); `crossEntropyTileFinish` then writes the row's lse and loss
 * lse − x_t + z·lse². Only lse [T] is kept for backward. Backward, per chunk and tile: the tile is
 * recomputed (the same product), `crossEntropyTileBackward` turns it in place into dlogits =
 * g/n·(softmax·(1 + 2z·lse) − onehot), and two accumulating products add dlogits·W_tile into dh and
 * dlogitsᵀ·h_chunk into dW_tile (the parameter's gradient accumulator, so a tied embedding simply
 * receives both its lookup's and the head's contributions).
 *
 * Why recompute in backward (Cut-CE) rather than form the gradients during forward (Liger). Liger
 * needs a row's final lse before any of its gradient, so it keeps a chunk's logits over the WHOLE
 * vocabulary, and it must keep dW [V × H] and dh [T × H] in f32 from forward until the backward
 * learns the upstream gradient. At the real shapes (T = 8192 tokens):
 * - H = 4096, V = 128256 (Llama-3): Liger keeps 2.10 GB (dW) + 134 MB (dh) across the rest of the
 *   forward and the backward; this op keeps 32 KiB (lse). The price is one more product of
 *   2·T·H·V = 8.6 TFLOP (4 products in all instead of 3; ~22 ms at 400 TFLOP/s).
 * - H = 2048, V = 151936 (Qwen3-MoE): 1.25 GB + 67 MB against 32 KiB, for 5.1 TFLOP more (~13 ms).
 * Peak memory is this bound (at or below DeepSpeed's) and the head's extra product is a few
 * percent of a full-depth model's step, so recomputation is the default. The transient memory is
 * one tile of 4·chunkTokens·tileVocab bytes (128 MiB by default) against 8·T·V bytes (8.4 GB) for
 * the unfused logits + dlogits.
 *
 * Precision: hidden and weight are f32 (a 16-bit job's head weight is its unit's f32 working copy,
 * nn/unit.ts; gradients accumulate in f32); logits, lse and the softmax are f32 on the device.
 */
import type { View } from "@zeromoe/kernels";
import { gradTarget, isGradEnabled, record } from "../tape.ts";
import { Tensor, empty } from "../tensor.ts";
import { planTiles, type TilePlanOptions } from "./linear-cross-entropy-plan.ts";
import { scaledLossTotal } from "./loss.ts";

/** Options of {@link linearCrossEntropy}. */
export interface LinearCrossEntropyOptions extends TilePlanOptions {
  /** Target value that marks a row as not scored (default −100, PyTorch's). */
  ignoreIndex?: number;
  /** PaLM's z-loss coefficient (Chowdhery et al. 2022, §5): adds coef·lse² per scored row to the
   * loss, so the mean loss gains coef·mean(lse²) over the scored rows. Default 0. */
  zLoss?: number;
  /** The same targets on the host (length T). When given, chunks in which every target is
   * `ignoreIndex` are skipped in forward and backward (their rows contribute nothing anyway). */
  hostTargets?: ArrayLike<number>;
}

function at(v: View, off: number): View {
  return { buf: v.buf, off: v.off + off };
}

/**
 * Mean over the `numValid` scored rows of cross-entropy(hidden · weightᵀ, targets) (+ the z-loss),
 * as PyTorch's `F.cross_entropy(F.linear(hidden, weight), targets, ignore_index, reduction="mean")`
 * (+ z·mean(logsumexp²)), computed tile by tile (see the module comment).
 * Shapes: hidden f32 [..., H] with T rows, weight f32 [V, H], targets i32 with T elements, each in
 * [0, V) or `ignoreIndex`; `numValid` = the number of targets ≠ ignoreIndex (0 → loss 0, zero
 * gradients). Returns a [1] tensor; gradients flow to hidden and weight.
 * @throws on dtype/shape mismatches, a bad numValid, hostTargets of the wrong length, a negative
 * or non-finite zLoss, or a tile that does not fit one binding (planTiles).
 */
export function linearCrossEntropy(hidden: Tensor, weight: Tensor, targets: Tensor, numValid: number, opts: LinearCrossEntropyOptions = {}): Tensor {
  if (hidden.dtype !== "f32" || weight.dtype !== "f32") throw new Error(`linearCrossEntropy: hidden and weight must be f32, got ${hidden} and ${weight}`);
  if (targets.dtype !== "i32") throw new Error(`linearCrossEntropy: targets must be i32, got ${targets}`);
  if (weight.ndim !== 2) throw new Error(`linearCrossEntropy: weight must be [vocab, hidden], got ${weight}`);
  const [V, H] = weight.shape as [number, number];
  if (hidden.ndim < 1 || hidden.cols !== H) throw new Error(`linearCrossEntropy: hidden ${hidden} must have ${H} features (weight ${weight})`);
  const T = hidden.rows;
  if (targets.numel !== T) throw new Error(`linearCrossEntropy: ${targets} must have one target per hidden row (${T} rows in ${hidden})`);
  if (V < 1) throw new Error(`linearCrossEntropy: the vocabulary is empty (weight ${weight})`);
  if (!Number.isInteger(numValid) || numValid < 0 || numValid > T) throw new Error(`linearCrossEntropy: numValid must be an integer in [0, ${T}], got ${numValid}`);
  const ignore = opts.ignoreIndex ?? -100;
  const z = opts.zLoss ?? 0;
  if (!(z >= 0) || !Number.isFinite(z)) throw new Error(`linearCrossEntropy: options.zLoss must be a finite number ≥ 0, got ${z}`);
  const host = opts.hostTargets;
  if (host && host.length !== T) throw new Error(`linearCrossEntropy: options.hostTargets has ${host.length} entries, expected ${T}`);
  const be = hidden.be;
  const { chunkTokens: TC, tileVocab: TV } = planTiles(be, T, V, opts);
  const chunks: { r0: number; rows: number }[] = [];
  for (let r0 = 0; r0 < T; r0 += TC) {
    const rows = Math.min(TC, T - r0);
    let scored = true;
    if (host) {
      scored = false;
      for (let i = r0; i < r0 + rows && !scored; i++) if (host[i] !== ignore) scored = true;
    }
    if (scored) chunks.push({ r0, rows });
  }
  const tiles: { v0: number; cols: number }[] = [];
  for (let v0 = 0; v0 < V; v0 += TV) tiles.push({ v0, cols: Math.min(TV, V - v0) });
  const scale = numValid > 0 ? 1 / numValid : 0;

  /** logits of chunk rows × tile columns into `tile` (zeros when H = 0). */
  const product = (tile: View, c: { r0: number; rows: number }, t: { v0: number; cols: number }): void => {
    if (H === 0) be.fill(tile, 0, c.rows * t.cols);
    else be.matmul(at(hidden.view, c.r0 * H), at(weight.view, t.v0 * H), tile, { M: c.rows, N: t.cols, K: H, transB: true });
  };

  const losses = empty(be, [Math.max(T, 1)]);
  const lse = empty(be, [Math.max(T, 1)]);
  if (chunks.length > 0) {
    const tileBuf = be.alloc("f32", Math.max(1, Math.min(TC, T) * TV), "activation", "any");
    const stats = be.alloc("f32", 3 * Math.min(TC, T), "activation", "any");
    const tile = { buf: tileBuf, off: 0 };
    const st = { buf: stats, off: 0 };
    for (const c of chunks) {
      const tg = at(targets.view, c.r0);
      for (const t of tiles) {
        product(tile, c, t);
        be.crossEntropyTileStats(tile, tg, st, c.rows, t.cols, t.v0, ignore, t.v0 === 0);
      }
      be.crossEntropyTileFinish(st, tg, at(lse.view, c.r0), at(losses.view, c.r0), c.rows, V, ignore, z);
    }
    be.free(stats);
    be.free(tileBuf);
  }
  const out = scaledLossTotal(losses, T, scale);
  losses.dispose();
  if (!(isGradEnabled() && (hidden.requiresGrad || weight.requiresGrad))) {
    lse.dispose();
    return out;
  }
  return record("linearCrossEntropy", [hidden, weight], out, (g) => {
    const dh = gradTarget(hidden, "add");
    const dw = gradTarget(weight, "add");
    if (chunks.length > 0 && (dh || dw)) {
      const tileBuf = be.alloc("f32", Math.max(1, Math.min(TC, T) * TV), "activation", "any");
      const tile = { buf: tileBuf, off: 0 };
      for (const c of chunks) {
        const tg = at(targets.view, c.r0);
        for (const t of tiles) {
          product(tile, c, t);
          be.crossEntropyTileBackward(tile, tg, at(lse.view, c.r0), g.view, c.rows, t.cols, t.v0, ignore, scale, z);
          if (H === 0) continue;
          // dh[chunk] += dlogits · W_tile;  dW[tile] += dlogitsᵀ · h[chunk]
          if (dh) be.matmul(tile, at(weight.view, t.v0 * H), at(dh.view, c.r0 * H), { M: c.rows, N: H, K: t.cols, accumulate: true });
          if (dw) be.matmul(tile, at(hidden.view, c.r0 * H), at(dw.view, t.v0 * H), { M: t.cols, N: H, K: c.rows, transA: true, accumulate: true });
        }
      }
      be.free(tileBuf);
    }
    dh?.commit();
    dw?.commit();
    lse.dispose();
  });
}
