/**
 * Conformance at awkward sizes for the device-offset grouped matmuls (groupedMatmulDev and
 * groupedWeightGrad; on a GPU the grouped modes of the dense matmul generator, see
 * kernels/src/wgsl/grouped-matmul.ts) against a float64 reference: groups of 0 and 1 rows, every
 * row in one group, prime sizes, R not a multiple of any tile, N and K not multiples of 4, rows
 * before offsets[0] and after offsets[G] (must stay untouched), a W stride with gaps (gaps must
 * stay untouched), accumulate on and off, transB both ways. The case runners are exported so
 * kernels/test/webgpu/grouped-matmul-tiles.test.ts can run them with every catalogue tile forced,
 * and ./moe-device.ts runs its MoE cases through them (with the per-group matmul check on cpu).
 */

import { refMatmul } from "../reference/matmul.ts";
import { type Ctx, Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** A forward/dX case: out[rows_g] (+)= x[rows_g]·op(w_g), x [R, K], out [R, N]. */
export interface GroupedRowsCase {
  name: string;
  offsets: number[];
  R: number;
  N: number;
  K: number;
  /** Elements between groups' W (default N·K). */
  strideW?: number;
}

/** A weight-gradient case: dw_g [M, N] (+)= dy[rows_g]ᵀ·x[rows_g], dy [R, M], x [R, N]. */
export interface GroupedWGradCase {
  name: string;
  offsets: number[];
  R: number;
  M: number;
  N: number;
  /** Elements between groups' dW (default 5; must stay untouched). */
  gap?: number;
}

/** Forward/dX cases (each run with transB both ways and accumulate on and off). */
export const GROUPED_ROWS_CASES: readonly GroupedRowsCase[] = [
  { name: "groups of 0 and 1 rows", offsets: [0, 0, 1, 1, 2, 2], R: 5, N: 7, K: 5 },
  { name: "every row in one group, R = 131", offsets: [0, 0, 131, 131], R: 131, N: 13, K: 11 },
  { name: "primes, uneven, N/K not multiples of 4", offsets: [0, 37, 38, 101, 173, 173, 257], R: 263, N: 71, K: 29 },
  { name: "rows before offsets[0] untouched, long groups", offsets: [3, 132, 133, 300], R: 307, N: 33, K: 67, strideW: 33 * 67 + 9 },
  { name: "one row, N = 1, K = 1", offsets: [0, 1], R: 1, N: 1, K: 1 },
  { name: "K = 0: covered rows become zeros", offsets: [0, 2, 5], R: 6, N: 9, K: 0 },
];

/** Weight-gradient cases (each run with accumulate on and off). */
export const GROUPED_WGRAD_CASES: readonly GroupedWGradCase[] = [
  { name: "groups of 0 and 1 rows", offsets: [0, 0, 1, 1, 2, 2], R: 5, M: 7, N: 5 },
  { name: "every row in one group", offsets: [0, 0, 131, 131], R: 131, M: 13, N: 11 },
  { name: "primes, M/N not multiples of 4", offsets: [0, 37, 38, 101, 173, 173, 257], R: 263, M: 71, N: 29 },
  { name: "rows before offsets[0] ignored, M and N past 128", offsets: [3, 132, 133, 300], R: 307, M: 131, N: 137 },
];

/** Runs one forward/dX case on `c.be` and checks it (values, untouched rows and gaps, guards).
 * With `perGroup` on the cpu backend, also bit for bit against one plain matmul per group. */
export async function checkGroupedRows(c: Ctx, r: Rng, cs: GroupedRowsCase, transB: boolean, acc: boolean, perGroup = false): Promise<void> {
  const { offsets, R, N, K } = cs;
  const G = offsets.length - 1;
  const sW = cs.strideW ?? N * K;
  const x = r.f32(R * K);
  const w = r.f32((G - 1) * sW + N * K);
  const init = r.f32(R * N);
  const out = c.output(R * N, "f32", init);
  const xv = c.input(x), wv = c.input(w);
  c.be.groupedMatmulDev(xv, wv, out.view, c.ints(offsets), { G, R, N, K, transB, strideW: sW, accumulate: acc });
  const got = await out.read();
  await out.checkGuards();
  const per = perGroup && c.be.info.name === "cpu" ? c.output(R * N, "f32", init) : null;
  const want = Float64Array.from(init);
  const mag = Float64Array.from(init, Math.abs);
  for (let g = 0; g < G; g++) {
    const r0 = offsets[g]!, M = offsets[g + 1]! - r0;
    if (M === 0) continue;
    const ms = { M, N, K, transB, accumulate: acc };
    const ref = refMatmul(x, r0 * K, w, g * sW, acc ? init : new Float64Array(R * N), r0 * N, ms);
    want.set(ref.out.subarray(r0 * N, (r0 + M) * N), r0 * N);
    mag.set(ref.mag.subarray(r0 * N, (r0 + M) * N), r0 * N);
    if (per) c.be.matmul({ buf: xv.buf, off: xv.off + r0 * K }, { buf: wv.buf, off: wv.off + g * sW }, { buf: per.view.buf, off: per.view.off + r0 * N }, ms);
  }
  const label = `groupedMatmulDev ${cs.name} (${transB ? "transB" : "K×N"}, ${acc ? "accumulate" : "set"})`;
  c.close(label, got, want, { mag, factor: 4 });
  const first = offsets[0]!, end = offsets[G]!;
  c.exact(`${label}: rows before offsets[0]`, got.subarray(0, first * N), init.subarray(0, first * N));
  c.exact(`${label}: rows past offsets[G]`, got.subarray(end * N), init.subarray(end * N));
  if (per) c.exact(`${label} vs per-group matmul`, got, await per.read());
}

/** Runs one weight-gradient case (dw_g with a gap of `cs.gap` elements between groups, which must
 * stay untouched) and checks it; `perGroup` as in {@link checkGroupedRows}. */
export async function checkGroupedWGrad(c: Ctx, r: Rng, cs: GroupedWGradCase, acc: boolean, perGroup = false): Promise<void> {
  const { offsets, R, M, N } = cs;
  const G = offsets.length - 1;
  const stride = M * N + (cs.gap ?? 5);
  const dy = r.f32(R * M);
  const x = r.f32(R * N);
  const init = r.f32(G * stride);
  const dw = c.output(G * stride, "f32", init);
  const dyv = c.input(dy), xv = c.input(x);
  c.be.groupedWeightGrad(dyv, xv, dw.view, c.ints(offsets), { G, R, M, N, strideW: stride, accumulate: acc });
  const got = await dw.read();
  await dw.checkGuards();
  const per = perGroup && c.be.info.name === "cpu" ? c.output(G * stride, "f32", init) : null;
  const want = Float64Array.from(init);
  const mag = Float64Array.from(init, Math.abs);
  for (let g = 0; g < G; g++) {
    const r0 = offsets[g]!, rows = offsets[g + 1]! - r0, base = g * stride;
    if (rows === 0) {
      if (!acc) for (let i = 0; i < M * N; i++) { want[base + i] = 0; mag[base + i] = 0; }
      if (per && !acc) c.be.fill({ buf: per.view.buf, off: per.view.off + base }, 0, M * N);
      continue;
    }
    const ms = { M, N, K: rows, transA: true, accumulate: acc };
    const ref = refMatmul(dy, r0 * M, x, r0 * N, acc ? init : new Float64Array(G * stride), base, ms);
    want.set(ref.out.subarray(base, base + M * N), base);
    mag.set(ref.mag.subarray(base, base + M * N), base);
    if (per) c.be.matmul({ buf: dyv.buf, off: dyv.off + r0 * M }, { buf: xv.buf, off: xv.off + r0 * N }, { buf: per.view.buf, off: per.view.off + base }, ms);
  }
  const label = `groupedWeightGrad ${cs.name} (${acc ? "accumulate" : "set"})`;
  c.close(label, got, want, { mag, factor: 4 });
  if (per) c.exact(`${label} vs per-group matmul`, got, await per.read());
}

/** Registers the awkward-size grouped matmul tests. */
export function groupedAwkwardTests(t: T): void {
  t("groupedMatmulDev at awkward sizes (transB both ways, accumulate on/off)", async (c) => {
    const r = new Rng(4700);
    for (const cs of GROUPED_ROWS_CASES) for (const transB of [false, true]) for (const acc of [false, true]) await checkGroupedRows(c, r, cs, transB, acc);
  });
  t("groupedWeightGrad at awkward sizes (accumulate on/off)", async (c) => {
    const r = new Rng(4800);
    for (const cs of GROUPED_WGRAD_CASES) for (const acc of [false, true]) await checkGroupedWGrad(c, r, cs, acc);
  });
}
