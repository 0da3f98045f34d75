/** Float64 reference matmul straight from the definition out[b][i][j] = Σ_k opA[b][i][k]·opB[b][k][j]. */

import type { MatmulSpec } from "../../src/backend.ts";

/** Computes into a copy of `outInit` (the old output, used when accumulating), over the elements the
 * spec touches; returns the new output and, per element, the magnitude Σ_k |a·b| (+|old| when
 * accumulating) for tolerances. Arrays are whole buffers; `aOff/bOff/oOff` are element offsets. */
export function refMatmul(a: ArrayLike<number>, aOff: number, b: ArrayLike<number>, bOff: number, outInit: ArrayLike<number>, oOff: number, spec: MatmulSpec): { out: Float64Array; mag: Float64Array } {
  const { M, N, K } = spec;
  const batch = spec.batch ?? 1;
  const sA = spec.strideA ?? M * K;
  const sB = spec.strideB ?? K * N;
  const sO = spec.strideOut ?? M * N;
  const out = Float64Array.from(outInit);
  const mag = new Float64Array(out.length);
  const A = (t: number, i: number, k: number) => (spec.transA ? a[aOff + t * sA + k * M + i]! : a[aOff + t * sA + i * K + k]!);
  const B = (t: number, k: number, j: number) => (spec.transB ? b[bOff + t * sB + j * K + k]! : b[bOff + t * sB + k * N + j]!);
  for (let t = 0; t < batch; t++) {
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let s = 0;
        let m = 0;
        for (let k = 0; k < K; k++) {
          s += A(t, i, k) * B(t, k, j);
          m += Math.abs(A(t, i, k) * B(t, k, j));
        }
        const o = oOff + t * sO + i * N + j;
        if (spec.accumulate) {
          m += Math.abs(out[o]!);
          out[o] = out[o]! + s;
        } else out[o] = s;
        mag[o] = m;
      }
    }
  }
  return { out, mag };
}
