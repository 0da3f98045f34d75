/**
 * Validation of the grouped matmul specs shared by the cpu and webgpu backends
 * (kernels/src/grouped-matmul-spec.ts).
 */
import { expect, test } from "bun:test";
import { groupedWGradGeometry } from "../src/grouped-matmul-spec.ts";

test("groupedWeightGrad: a W stride below M·N with several groups is refused (the dW would overlap)", () => {
  expect(() => groupedWGradGeometry({ G: 3, R: 10, M: 7, N: 5, strideW: 34 }, "cpu")).toThrow(/cpu groupedWeightGrad: spec.strideW must be at least M·N = 35 when G > 1.*got 34/);
  expect(groupedWGradGeometry({ G: 3, R: 10, M: 7, N: 5, strideW: 35 }, "cpu").strideW).toBe(35);
  expect(groupedWGradGeometry({ G: 3, R: 10, M: 7, N: 5 }, "cpu").strideW).toBe(35);
  // one group: the stride is never used
  expect(groupedWGradGeometry({ G: 1, R: 10, M: 7, N: 5, strideW: 0 }, "cpu").strideW).toBe(0);
  expect(() => groupedWGradGeometry({ G: 2, R: 10, M: 7, N: -5 }, "webgpu")).toThrow(/spec.N must be a non-negative integer/);
});
