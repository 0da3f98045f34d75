/**
 * Every tensor-core kernel passes naga's validation with the cooperative-matrix capability —
 * checked without a GPU that has it, through our library's validator (src/ffi/naga-validate.ts).
 * wgpu runs the same front end and validator when it creates a module, so a kernel rejected here
 * would fail to compile on a tensor-core GPU even though lavapipe (no VK_KHR_cooperative_matrix)
 * runs only its emulated form. The first cases show the validator is not a stub: a valid module
 * passes, a syntax error and the uniformity fault that once shipped (a cooperative-matrix load after
 * an early `return` whose condition came through a helper function, which naga analyses as
 * non-uniform) are reported.
 *
 * Kernels: the attention forward, dQ and dK/dV kernels (wgsl/attention-coop.ts) at every head dim
 * the kernels take (16…128), causal and full, for every block the block check accepts; the matmul
 * kernels (wgsl/matmul-coop-launch.ts coopKernel) over layouts, accumulate, staging, vector widths,
 * load types, epilogues, the candidate tiles, grouped modes and packed/scaled operands.
 *
 * Runs on our library only (ZEROMOE_WGPU=coop: the conformance pass of scripts/test.sh); skipped
 * with the reason on the prebuilt wgpu-native.
 */
import { describe, expect, test } from "bun:test";
import type { Buf } from "../../src/backend.ts";
import { loadNative } from "../../src/ffi/native.ts";
import { nagaValidateWgsl } from "../../src/ffi/naga-validate.ts";
import { assembleWgsl, type Launch } from "../../src/webgpu/kernel.ts";
import { attentionCoopBackwardLaunches, attentionCoopLaunches, coopAttnBlockProblem, type CoopAttnBlock, type CoopAttnBlocks } from "../../src/wgsl/attention-coop.ts";
import { coopKernel } from "../../src/wgsl/matmul-coop-launch.ts";
import type { CoopMatmulOptions } from "../../src/wgsl/matmul-coop-wgsl.ts";
import { TENSOR_CORE_CANDIDATE_TILES, DEFAULT_TENSOR_CORE_TILE } from "../../src/webgpu/tensor-cores.ts";

let skip = "";
try {
  if (!loadNative().validate) skip = "the loaded library has no validator (it is in native/wgpu-coop: ZEROMOE_WGPU=coop)";
} catch (e) {
  skip = `no wgpu library: ${(e as Error).message.split("\n")[0]}`;
}
if (skip) console.log(`[test] naga-validate: skipped: ${skip}`);

/** The WGSL module the backend would build for `l` (every declared buffer its own binding). */
function source(l: Launch): string {
  return assembleWgsl(l.kernel, l.kernel.buffers.map((_, i) => i)).source;
}

/** Stand-in buffers: the launch builders only pass them through. */
const buf = (dtype = "f32", size = 1 << 28): Buf => ({ dtype, size }) as unknown as Buf;
const scratch = (_name: string, dtype: string, n: number): Buf => buf(dtype, n);

/** The tensor-core kernels of `launches` (labels attention_coop_* / mmc_*) by label. */
function coopKernels(launches: Launch[], into: Map<string, string>): void {
  for (const l of launches) if (l.kernel.label.startsWith("attention_coop_") && !into.has(l.kernel.label)) into.set(l.kernel.label, source(l));
}

const HEADER = "enable f16;\nenable wgpu_cooperative_matrix;\n";
const BAD_UNIFORMITY = `${HEADER}
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
fn lin(wg: vec3<u32>) -> u32 { return wg.x; }
@compute @workgroup_size(32) fn main(@builtin(workgroup_id) wg: vec3<u32>) {
  if (lin(wg) >= 4u) { return; }
  let m = coopLoad<coop_mat16x16<f16, A>>(&a[0], 16u);
  var c = coop_mat16x16<f32, C>();
  c = coopMultiplyAdd(m, coopLoad<coop_mat16x16<f16, B>>(&a[0], 16u), c);
  coopStore(c, &o[0], 16u);
}`;

describe.skipIf(skip !== "")("naga validation of the tensor-core kernels", () => {
  test("the validator accepts a valid module and reports a syntax error and the early-return uniformity fault", () => {
    expect(nagaValidateWgsl(BAD_UNIFORMITY.replace("if (lin(wg) >= 4u) { return; }", "if (wg.x >= 4u) { return; }"))).toBe("");
    expect(nagaValidateWgsl("fn main( {")).not.toBe("");
    expect(nagaValidateWgsl(BAD_UNIFORMITY)).toContain("uniformity");
  });

  test("attention forward, dQ and dK/dV: every head dim, causal and full, every accepted block", () => {
    const sizes = [1, 2, 4, 8];
    const blocks = (kind: keyof CoopAttnBlocks): CoopAttnBlock[] => sizes.flatMap((sg) => sizes.map((kf) => ({ sg, kf }))).filter((b) => coopAttnBlockProblem(kind, b) === "");
    const all = new Map<string, string>();
    for (const D of [16, 32, 48, 64, 80, 96, 112, 128]) {
      for (const causal of [true, false]) {
        const fwd = blocks("fwd"), dq = blocks("dq"), dkv = blocks("dkv");
        const n = Math.max(fwd.length, dq.length, dkv.length);
        for (let i = 0; i < n; i++) {
          const b: CoopAttnBlocks = { fwd: fwd[i % fwd.length]!, dq: dq[i % dq.length]!, dkv: dkv[i % dkv.length]! };
          const p = { B: 2, S: 37, H: 4, Hkv: 2, D, scale: 1 / Math.sqrt(D), causal, blocks: b, emulate: false };
          coopKernels(attentionCoopLaunches(buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), 0, p, scratch), all);
          coopKernels(attentionCoopBackwardLaunches(buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), 0, buf(), p, scratch), all);
        }
      }
    }
    expect(all.size).toBeGreaterThan(3 * 8 * 2);
    const failed: string[] = [];
    for (const [label, src] of all) {
      const msg = nagaValidateWgsl(src);
      if (msg !== "") failed.push(`${label}: ${msg.slice(0, 600)}`);
    }
    expect(failed).toEqual([]);
  }, 300_000);

  test("matmul kernels: layouts, accumulate, staging, vectors, load types, epilogues, tiles, grouped, packed/scaled", () => {
    const tiles = [DEFAULT_TENSOR_CORE_TILE, ...TENSOR_CORE_CANDIDATE_TILES];
    const cases: CoopMatmulOptions[] = [];
    for (const tile of tiles) {
      for (const [transA, transB] of [[false, false], [true, false], [false, true], [true, true]] as const) {
        for (const accumulate of [false, true]) {
          cases.push({ input: "f32", transA, transB, accumulate, mode: "kernel", tile });
          for (const staging of ["regs", "coop", "none"] as const) {
            for (const vec of staging === "regs" ? ([4, 8] as const) : ([undefined] as const)) {
              for (const vec8Type of vec === 8 ? (["u32", "mat2x4"] as const) : ([undefined] as const)) {
                for (const epilogue of ["scratch", "direct"] as const) {
                  cases.push({ input: "f16", transA, transB, accumulate, mode: "kernel", tile, packed: true, scaled: true, staging, vec, vec8Type, epilogue });
                }
              }
            }
          }
          for (const grouped of ["rows", "wgrad"] as const) cases.push({ input: "f16", transA, transB, accumulate, mode: "kernel", tile, packed: true, scaled: true, staging: "regs", vec: 8, grouped } as CoopMatmulOptions);
        }
      }
    }
    const failed: string[] = [];
    const seen = new Set<string>();
    for (const o of cases) {
      let k;
      try {
        k = coopKernel(o);
      } catch {
        continue; // a combination the generator refuses (checked by the matmul tests) is not a kernel
      }
      if (seen.has(k.label)) continue;
      seen.add(k.label);
      const msg = nagaValidateWgsl(assembleWgsl(k, k.buffers.map((_, i) => i)).source);
      if (msg !== "") failed.push(`${k.label}: ${msg.slice(0, 600)}`);
    }
    expect(seen.size).toBeGreaterThan(20);
    expect(failed).toEqual([]);
  }, 300_000);
});
