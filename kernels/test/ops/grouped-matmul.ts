/**
 * Conformance: groupedMatmul (backend.ts GroupedMatmulSpec) against the float64 reference of each
 * group's matmul and against the backend's own per-group `matmul` (exactly equal on the cpu
 * backend, which runs the same kernel per group; within the f32 tolerance on a GPU). Awkward
 * segments: one group, one row, empty groups (first, middle, last), every row in one group,
 * primes, groups longer than a 16-row tile, N and K not multiples of 16, transB both ways, a W
 * stride with gaps, accumulate.
 */

import type { GroupedMatmulSpec } from "../../src/backend.ts";
import { refMatmul } from "../reference/matmul.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Registers the grouped matmul tests. */
export function groupedMatmulTests(t: T): void {
  const cases = (large: (n: number, min?: number) => number): { name: string; spec: GroupedMatmulSpec }[] => [
    { name: "one group of one row", spec: { offsets: [0, 1], N: 1, K: 1 } },
    { name: "5 groups, empty first/middle/last, transB", spec: { offsets: [0, 0, 3, 3, 20, 20], N: 7, K: 13, transB: true } },
    { name: "every row in one of 4 groups", spec: { offsets: [0, 0, 0, 37, 37], N: 17, K: 5 } },
    { name: "primes, K > 16, W stride with gaps, accumulate", spec: { offsets: [0, 2, 7, 18], N: 19, K: 23, transB: true, strideW: 19 * 23 + 5, accumulate: true } },
    { name: "8 experts, larger", spec: { offsets: [0, 5, 5, 40, 41, 77, 77, 90, large(200, 100)], N: large(65, 17), K: large(48, 16), transB: true } },
    { name: "all groups empty", spec: { offsets: [0, 0, 0], N: 3, K: 4 } },
  ];
  t("groupedMatmul = per-group matmul (float64 reference and the backend's matmul)", async (c) => {
    const r = new Rng(760);
    for (const { name, spec } of cases((n, m) => c.large(n, m))) {
      const { N, K, offsets } = spec;
      const G = offsets.length - 1;
      const R = offsets[G]!;
      const sW = spec.strideW ?? N * K;
      const x = r.f32(R * K);
      const w = r.f32(G === 0 ? 0 : (G - 1) * sW + N * K);
      const init = r.f32(R * N);
      const xv = c.input(x);
      const wv = c.input(w);
      const out = c.output(R * N, "f32", spec.accumulate ? init : undefined);
      c.be.groupedMatmul(xv, wv, out.view, spec);
      const got = await out.read();
      await out.checkGuards();
      // per-group references: float64, and the backend's matmul on the same rows
      const per = c.output(R * N, "f32", spec.accumulate ? init : undefined);
      const want = new Float64Array(R * N);
      const mag = new Float64Array(R * N);
      for (let g = 0; g < G; g++) {
        const M = offsets[g + 1]! - offsets[g]!;
        if (M === 0) continue;
        const ms = { M, N, K, transB: spec.transB, accumulate: spec.accumulate };
        const r0 = offsets[g]!;
        const ref = refMatmul(x, r0 * K, w, g * sW, spec.accumulate ? init : new Float64Array(R * N), r0 * N, ms);
        want.set(ref.out.subarray(r0 * N, (r0 + M) * N), r0 * N);
        mag.set(ref.mag.subarray(r0 * N, (r0 + M) * N), r0 * N);
        c.be.matmul({ buf: xv.buf, off: xv.off + r0 * K }, { buf: wv.buf, off: wv.off + g * sW }, { buf: per.view.buf, off: per.view.off + r0 * N }, ms);
      }
      c.close(`groupedMatmul ${name}`, got, want, { mag, factor: 4 });
      const perGot = await per.read();
      if (c.be.info.name === "cpu") c.exact(`groupedMatmul ${name} vs per-group matmul`, got, perGot);
      else c.close(`groupedMatmul ${name} vs per-group matmul`, got, perGot, { mag, factor: 8 });
    }
  });

  t("groupedMatmul refuses bad offsets naming them", async (c) => {
    const x = c.input(new Float32Array(4));
    const w = c.input(new Float32Array(4));
    const out = c.output(4);
    const bad: [GroupedMatmulSpec, RegExp][] = [
      [{ offsets: [1, 2], N: 1, K: 1 }, /offsets\[0\] must be 0/],
      [{ offsets: [0, 3, 2], N: 1, K: 1 }, /non-decreasing/],
      [{ offsets: [0], N: 1, K: 1 }, /G \+ 1 ≥ 2/],
      [{ offsets: [0, 2], N: -1, K: 1 }, /spec\.N/],
    ];
    for (const [spec, re] of bad) {
      let msg = "";
      try {
        c.be.groupedMatmul(x, w, out.view, spec);
      } catch (e) {
        msg = (e as Error).message;
      }
      if (!re.test(msg)) throw new Error(`expected an error matching ${re}, got "${msg}"`);
    }
  });
}
