/**
 * Matrix products: batched `matmul` with optional transposes, and `linear` (y = x Wᵀ, nn.Linear's
 * convention with W stored [out, in]). Backward uses the identities dA = dC·op(B)ᵀ and
 * dB = op(A)ᵀ·dC, expressed through the backend's transpose flags so nothing is materialised;
 * parameter gradients are accumulated in place (`accumulate: true`).
 */
import type { Backend, MatmulSpec, View } from "@zeromoe/kernels";
import { accumulateGrad, record } from "../tape.ts";
import { Tensor, empty, fmtShape, numelOf, uninit } from "../tensor.ts";

/** Options of {@link matmul}. */
export interface MatmulOptions {
  /** Use Aᵀ: A's last two dims are stored [K, M]. */
  transA?: boolean;
  /** Use Bᵀ: B's last two dims are stored [N, K]. */
  transB?: boolean;
}

/**
 * C = op(A)·op(B) over the last two dims. Leading (batch) dims of `a` and `b` must be equal, or
 * one of them has rank 2 and is broadcast to every batch. f32 only.
 * Shapes: op(A) [..., M, K], op(B) [..., K, N] → C [..., M, N].
 * @throws on rank < 2, mismatched K, or batch dims that are neither equal nor absent.
 */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  if (a.ndim < 2 || b.ndim < 2) throw new Error(`matmul: operands need rank ≥ 2, got ${a} and ${b}`);
  if (a.dtype !== "f32" || b.dtype !== "f32") throw new Error(`matmul: f32 operands expected, got ${a} and ${b}`);
  const transA = !!opts.transA;
  const transB = !!opts.transB;
  const [ar, ac] = a.shape.slice(-2) as [number, number];
  const [br, bc] = b.shape.slice(-2) as [number, number];
  const M = transA ? ac : ar;
  const K = transA ? ar : ac;
  const Kb = transB ? bc : br;
  const N = transB ? br : bc;
  if (K !== Kb) throw new Error(`matmul: inner dimensions differ: op(A) is ${M}×${K} (${a}), op(B) is ${Kb}×${N} (${b})`);
  const aBatch = a.shape.slice(0, -2);
  const bBatch = b.shape.slice(0, -2);
  let batchShape: readonly number[];
  if (aBatch.length === 0) batchShape = bBatch;
  else if (bBatch.length === 0) batchShape = aBatch;
  else {
    if (aBatch.length !== bBatch.length || aBatch.some((d, i) => d !== bBatch[i])) {
      throw new Error(`matmul: batch dims ${fmtShape(aBatch)} and ${fmtShape(bBatch)} must be equal (or one operand 2-D)`);
    }
    batchShape = aBatch;
  }
  const batch = numelOf(batchShape);
  const sA = aBatch.length === 0 ? 0 : M * K;
  const sB = bBatch.length === 0 ? 0 : K * N;
  const be = a.be;
  const out = empty(be, [...batchShape, M, N]);
  if (out.numel > 0) {
    if (K === 0) be.fill(out.view, 0, out.numel);
    else be.matmul(a.view, b.view, out.view, { M, N, K, batch, transA, transB, strideA: sA, strideB: sB, strideOut: M * N });
  }
  return record("matmul", [a, b], out, (g) => {
    // dA
    accumulateGrad(
      a,
      (dst, acc) => {
        if (sA === 0 && batch > 1) {
          // A broadcast over the batch: sum per-batch contributions.
          gradBroadcastOperand(be, batch, (i, d, accumulate) => dA(be, g.view, i * M * N, b.view, i * sB, d, M, N, K, transA, transB, accumulate), dst, acc);
        } else {
          be.matmul(...dAArgs(g.view, b.view, dst, M, N, K, transA, transB, batch, sB, acc));
        }
      },
      true,
    );
    // dB
    accumulateGrad(
      b,
      (dst, acc) => {
        if (sB === 0 && batch > 1) {
          if (!transA && !transB) {
            // Fold the batch into the rows: dB = A_allᵀ · dC_all, one product.
            be.matmul(a.view, g.view, dst, { M: K, N, K: batch * M, transA: true, accumulate: acc });
          } else if (!transA && transB) {
            be.matmul(g.view, a.view, dst, { M: N, N: K, K: batch * M, transA: true, accumulate: acc });
          } else {
            gradBroadcastOperand(be, batch, (i, d, accumulate) => dB(be, g.view, i * M * N, a.view, i * sA, d, M, N, K, transA, transB, accumulate), dst, acc);
          }
        } else {
          be.matmul(...dBArgs(g.view, a.view, dst, M, N, K, transA, transB, batch, sA, acc));
        }
      },
      true,
    );
  });
}

function at(v: View, off: number): View {
  return { buf: v.buf, off: v.off + off };
}

/** Arguments for dA (batched): stored-layout gradient of A. */
function dAArgs(g: View, b: View, dst: View, M: number, N: number, K: number, transA: boolean, transB: boolean, batch: number, sB: number, acc: boolean): [View, View, View, MatmulSpec] {
  if (!transA) {
    // dA [M,K] = dC [M,N] · op(B)ᵀ [N,K]; op(B)ᵀ is B as stored when transB, else Bᵀ.
    return [g, b, dst, { M, N: K, K: N, batch, transB: !transB, strideA: M * N, strideB: sB, strideOut: M * K, accumulate: acc }];
  }
  // A stored [K,M]: dA_stored = op(B) · dCᵀ  ([K,N]·[N,M]).
  return [b, g, dst, { M: K, N: M, K: N, batch, transA: transB, transB: true, strideA: sB, strideB: M * N, strideOut: M * K, accumulate: acc }];
}

/** Arguments for dB (batched): stored-layout gradient of B. */
function dBArgs(g: View, a: View, dst: View, M: number, N: number, K: number, transA: boolean, transB: boolean, batch: number, sA: number, acc: boolean): [View, View, View, MatmulSpec] {
  if (!transB) {
    // dB [K,N] = op(A)ᵀ [K,M] · dC [M,N]; op(A)ᵀ is A as stored when transA, else Aᵀ.
    return [a, g, dst, { M: K, N, K: M, batch, transA: !transA, strideA: sA, strideB: M * N, strideOut: K * N, accumulate: acc }];
  }
  // B stored [N,K]: dB_stored = dCᵀ · op(A)  ([N,M]·[M,K]).
  return [g, a, dst, { M: N, N: K, K: M, batch, transA: true, transB: transA, strideA: M * N, strideB: sA, strideOut: K * N, accumulate: acc }];
}

function dA(be: Backend, g: View, gOff: number, b: View, bOff: number, dst: View, M: number, N: number, K: number, transA: boolean, transB: boolean, acc: boolean): void {
  be.matmul(...dAArgs(at(g, gOff), at(b, bOff), dst, M, N, K, transA, transB, 1, 0, acc));
}

function dB(be: Backend, g: View, gOff: number, a: View, aOff: number, dst: View, M: number, N: number, K: number, transA: boolean, transB: boolean, acc: boolean): void {
  be.matmul(...dBArgs(at(g, gOff), at(a, aOff), dst, M, N, K, transA, transB, 1, 0, acc));
}

/** Sum per-batch contributions into `dst` in batch order (deterministic). */
function gradBroadcastOperand(_be: Backend, batch: number, one: (i: number, dst: View, accumulate: boolean) => void, dst: View, acc: boolean): void {
  for (let i = 0; i < batch; i++) one(i, dst, acc || i > 0);
}

/**
 * y = x·Wᵀ (nn.Linear without bias): x [..., in], W [out, in] → y [..., out]. dW accumulates
 * dYᵀ·X over all rows; dX = dY·W.
 * @throws if x's last dim ≠ W's second dim.
 */
export function linear(x: Tensor, w: Tensor): Tensor {
  if (w.ndim !== 2) throw new Error(`linear: weight must be [out, in], got ${w}`);
  const [outF, inF] = w.shape as [number, number];
  if (x.cols !== inF) throw new Error(`linear: input ${x} has ${x.cols} features, weight ${w} expects ${inF}`);
  if (x.dtype !== "f32" || w.dtype !== "f32") throw new Error(`linear: f32 expected, got ${x} and ${w}`);
  const rows = x.rows;
  const be = x.be;
  const out = uninit(be, [...x.shape.slice(0, -1), outF]); // set by the matmul, or the fill when in = 0
  if (out.numel > 0) {
    if (inF === 0) be.fill(out.view, 0, out.numel);
    else be.matmul(x.view, w.view, out.view, { M: rows, N: outF, K: inF, transB: true });
  }
  return record("linear", [x, w], out, (g) => {
    if (rows === 0 || outF === 0 || inF === 0) return;
    accumulateGrad(x, (dst, acc) => be.matmul(g.view, w.view, dst, { M: rows, N: inF, K: outF, accumulate: acc }), true, outF > 0);
    accumulateGrad(w, (dst, acc) => be.matmul(g.view, x.view, dst, { M: outF, N: inF, K: rows, transA: true, accumulate: acc }), true);
  });
}
