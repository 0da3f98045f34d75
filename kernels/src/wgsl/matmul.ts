/**
 * Matmul extents: how many elements A, B and out must hold from their offsets for a
 * {@link MatmulSpec} (backend bounds checks). The kernels themselves are in matmul_fast*.ts
 * (register-blocked, tiles chosen per shape; entry point `planMatmulFastLaunches`).
 */
import type { MatmulSpec } from "../backend.ts";

/** Elements each of A, B, out must hold from their offsets for `spec` (for bounds checks). */
export function matmulExtents(spec: MatmulSpec): { a: number; b: number; out: number } {
  const batch = spec.batch ?? 1;
  const { M, N, K } = spec;
  const sA = spec.strideA ?? M * K;
  const sB = spec.strideB ?? K * N;
  const sO = spec.strideOut ?? M * N;
  if (batch === 0 || M * N === 0) return { a: 0, b: 0, out: 0 };
  return { a: (batch - 1) * sA + M * K, b: (batch - 1) * sB + K * N, out: (batch - 1) * sO + M * N };
}
