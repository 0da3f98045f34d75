/** Conformance: matmul with transposes, batch strides (incl. broadcast stride 0), accumulate, offsets. */

import type { MatmulSpec } from "../../src/backend.ts";
import { refMatmul } from "../reference/matmul.ts";
import { Rng } from "./harness.ts";
import type { T } from "./index.ts";

/** Elements a batched operand spans. */
function extent(batch: number, stride: number, size: number): number {
  return batch === 0 ? 0 : (batch - 1) * stride + size;
}

/** Registers the matmul tests. */
export function matmulTests(t: T): void {
  const dims = (c: { large(n: number, min?: number): number }): [number, number, number][] => [
    [1, 1, 1],
    [3, 5, 7],
    [17, 13, 11],
    [4, 16, 64],
    [33, 65, 63],
    [6, 1031, 5], // wide N: several column panels in a blocked kernel, cheap everywhere
    [c.large(67, 5), c.large(130, 5), c.large(257, 5)],
  ];
  for (const transA of [false, true]) {
    for (const transB of [false, true]) {
      t(`matmul transA=${transA} transB=${transB}`, async (c) => {
        const r = new Rng(700 + (transA ? 2 : 0) + (transB ? 1 : 0));
        for (const [M, N, K] of dims(c)) {
          const spec: MatmulSpec = { M, N, K, transA, transB };
          const a = r.f32(M * K);
          const b = r.f32(K * N);
          const out = c.output(M * N);
          c.be.matmul(c.input(a), c.input(b), out.view, spec);
          const { out: want, mag } = refMatmul(a, 0, b, 0, new Float64Array(M * N), 0, spec);
          // K-term f32 dot products: error bounded relative to Σ|a·b| (mag)
          c.close(`matmul ${M}x${N}x${K} tA=${transA} tB=${transB}`, await out.read(), want, { mag, factor: 4 });
          await out.checkGuards();
        }
      });
    }
  }

  t("matmul batched with strides, broadcast (stride 0), padded strideOut, accumulate", async (c) => {
    const r = new Rng(710);
    const cases: MatmulSpec[] = [
      { M: 3, N: 5, K: 7, batch: 4 },
      { M: 5, N: 3, K: 9, batch: 3, strideB: 0 }, // one B for every batch (weights)
      { M: 7, N: 6, K: 5, batch: 2, transA: true, strideA: 40, strideOut: 50 }, // gaps between matrices
      { M: 4, N: 11, K: 13, batch: 3, transB: true, strideA: 0, accumulate: true },
      { M: 9, N: 17, K: c.large(31, 3), batch: 5, transA: true, transB: true, accumulate: true },
      { M: 1, N: 1, K: 1, batch: 1, accumulate: true },
    ];
    for (const spec of cases) {
      const { M, N, K } = spec;
      const batch = spec.batch ?? 1;
      const sA = spec.strideA ?? M * K;
      const sB = spec.strideB ?? K * N;
      const sO = spec.strideOut ?? M * N;
      const a = r.f32(extent(batch, sA, M * K));
      const b = r.f32(extent(batch, sB, K * N));
      const nOut = extent(batch, sO, M * N);
      const init = r.f32(nOut);
      const out = c.output(nOut, "f32", init);
      c.be.matmul(c.input(a), c.input(b), out.view, spec);
      const { out: want, mag } = refMatmul(a, 0, b, 0, init, 0, spec);
      c.close(`matmul ${JSON.stringify(spec)}`, await out.read(), want, { mag, factor: 4 });
      await out.checkGuards();
    }
  });
}
