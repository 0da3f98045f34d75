/**
 * The op conformance suite (kernels/test/ops, float64 references) on a {@link WebGpuBackend} whose
 * largest binding is lowered to 16 KiB (`maxBindingBytes`: segments of 4096 elements), so every
 * operand above 4096 elements is held in several buffers and the ops split over them
 * (webgpu/segments.ts) — the same expectations as on one binding. Skipped: the two MoE ops that
 * do not split by design (moePermute, a global sort; moeCombine, whose expert rows are read at
 * device-chosen indices) — their refusal is checked in segmented.test.ts — and the awkward-size
 * groupedWeightGrad case whose single dW_g (17947 elements) is longer than a segment (a limit:
 * one expert's weights must fit one binding, 2 GiB on the H200; refused naming it). (At 4096 elements every
 * row of the suite's operands fits a segment; segmented.test.ts covers rows longer than one.)
 */
import { createGPU } from "../../src/ffi/index.ts";
import { WebGpuBackend } from "../../src/webgpu/index.ts";
import { runOpSuite } from "../ops/index.ts";

runOpSuite("webgpu segmented (4096-element bindings)", async () => await WebGpuBackend.create(createGPU(), { maxBindingBytes: 16384 }), {
  tol: { rtol: 1e-4, atol: 1e-5 },
  sizeScale: Number(process.env.ZEROMOE_OPS_SIZE_SCALE ?? 0.25),
  timeoutMs: 120000,
  skip: /^moePermute|^moeCombine|^groupedWeightGrad at awkward sizes/,
  dispose: (be) => (be as WebGpuBackend).destroy(),
});
