/**
 * Op conformance suite for any {@link Backend}.
 *
 * Usage (in a `*.test.ts` file):
 *
 * ```ts
 * import { runOpSuite } from "../test/ops/index.ts"; // path relative to your test
 * runOpSuite("webgpu", async () => await createWebGpuBackend(), {
 *   tol: { rtol: 1e-4, atol: 1e-5 },   // base f32 tolerance (see below)
 *   sizeScale: 0.25,                    // shrink the "large" cases on slow devices
 *   dispose: (be) => (be as WebGpuBackend).destroy(),
 * });
 * ```
 *
 * `runOpSuite` registers one `describe("ops conformance: <name>")` with a nested describe per op
 * family (memory+transfer, elementwise, rows, matmul, embedding+loss, tiled cross-entropy, transformer, moe, optim,
 * determinism: bit-identical results when an op is run twice).
 * `make` runs once in `beforeAll`; every test allocates through a context that frees its buffers
 * afterwards. Each op is compared with the float64 reference in `kernels/test/reference/` on
 * seeded random data at sizes 1, primes, non-multiples of 4/16/64 and one larger size (scaled by
 * `sizeScale`). Inputs live at a non-zero element offset and every output is surrounded by guard
 * elements that must stay untouched. Bit patterns (cast, fill of 16-bit, param16 of adamw),
 * indices (topk), counts (histogram) and copies (embedding, gatherRows) must match exactly.
 *
 * Tolerance: an element passes when |got − want| ≤ factor·(atol + rtol·s), where s is |want|
 * (+ Σ|terms| for sums: matmul, reduce, affine) or max|want| of the output for gradients that
 * arise by cancellation ("normwise"), and `factor` is a small per-op multiple stated at each call
 * with the reason (longer chains of f32 roundings). Suggested: CPU f32 { rtol: 1e-5, atol: 1e-6 }
 * (f64 accumulation, one final f32 rounding); CPU f64 { rtol: 1e-10, atol: 1e-12 }; a GPU
 * backend accumulating in f32 { rtol: 1e-4, atol: 1e-5 } (K-term f32 sums lose ~√K·2^-24).
 */

import { afterAll, beforeAll, describe, test } from "../../src/runtime/bdd.ts";
import type { Backend } from "../../src/backend.ts";
import { determinismTests } from "./determinism.ts";
import { elementwiseTests } from "./elementwise.ts";
import { fusedTests } from "./fused.ts";
import { embeddingTests } from "./embedding.ts";
import { Ctx, type OpSuiteOptions } from "./harness.ts";
import { matmulTests } from "./matmul.ts";
import { groupedMatmulTests } from "./grouped-matmul.ts";
import { groupedAwkwardTests } from "./grouped-awkward.ts";
import { memoryTests } from "./memory.ts";
import { moeTests } from "./moe.ts";
import { moeDeviceTests } from "./moe-device.ts";
import { optimTests } from "./optim.ts";
import { rowTests } from "./rows.ts";
import { transformerTests } from "./transformer.ts";
import { tiledCrossEntropyTests } from "./tiled-cross-entropy.ts";

export type { OpSuiteOptions, Tol } from "./harness.ts";
export { Ctx } from "./harness.ts";

/** Registers one test: `fn` receives a fresh {@link Ctx} bound to the backend under test. */
export type T = (title: string, fn: (c: Ctx) => Promise<void>) => void;

/** Register the whole conformance suite for the backend made by `make` (see the file header). */
export function runOpSuite(name: string, make: () => Promise<Backend> | Backend, opts: OpSuiteOptions): void {
  const scale = opts.sizeScale ?? 1;
  if (!(scale > 0 && scale <= 1)) throw new Error(`runOpSuite(${name}): opts.sizeScale must be in (0, 1], got ${scale}`);
  const timeout = opts.timeoutMs ?? 30000;
  describe(`ops conformance: ${name}`, () => {
    let be: Backend | undefined;
    beforeAll(async () => {
      be = await make();
    });
    afterAll(async () => {
      if (be && opts.dispose) await opts.dispose(be);
    });
    const t: T = (title, fn) =>
      (opts.skip?.test(title) ? test.skip : test)(
        title,
        async () => {
          if (!be) throw new Error(`runOpSuite(${name}): the backend was not created (make() failed)`);
          const c = new Ctx(be, opts.tol, scale);
          try {
            await fn(c);
          } finally {
            c.freeAll();
          }
        },
        timeout,
      );
    describe("memory and transfer", () => memoryTests(t));
    describe("elementwise", () => elementwiseTests(t));
    describe("fused elementwise", () => fusedTests(t));
    describe("reductions, softmax, norms", () => rowTests(t));
    describe("matmul", () => matmulTests(t));
    describe("grouped matmul", () => groupedMatmulTests(t));
    describe("grouped matmul at awkward sizes", () => groupedAwkwardTests(t));
    describe("embedding and loss", () => embeddingTests(t));
    describe("tiled cross-entropy", () => tiledCrossEntropyTests(t));
    describe("rope and attention", () => transformerTests(t));
    describe("moe primitives", () => moeTests(t));
    describe("moe on the device", () => moeDeviceTests(t));
    describe("optimizer", () => optimTests(t));
    describe("determinism", () => determinismTests(t));
  });
}
