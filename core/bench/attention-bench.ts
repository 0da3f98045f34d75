/**
 * Causal attention forward and backward at the training benchmarks' shapes, GPU time per kernel
 * (timestamp queries, `profile: true`) for each WebGPU attention mode, with the FLOP and byte
 * floors of the shape. The PyTorch counterpart is core/bench/torch_attention.py.
 *
 *   bun core/bench/attention-bench.ts [--shapes 16x256x8x8x64,8x1024x16x8x64] [--modes auto,tiled] [--reps 10] [--torch bf16]
 *
 * With `--torch DTYPE` (fp32, bf16 or fp16) the command first runs torch_attention.py at the same
 * shapes and dtype (python3, or $PYTHON) and prints its lines, so one command gives both.
 * The real shapes: Llama-3-8B 4x2048x32x8x128, Qwen3-30B-A3B 4x2048x32x4x128 (micro-batch 4).
 *
 * A shape is B×S×H×Hkv×D. A mode is "auto", "tiled", "rows", or "auto:" followed by forced fused
 * kernel blocks, e.g. `auto:dq=64x16r4+dkv=32x32r2ph` (rows × cols, r = rows per invocation, then
 * `p` = register prefetch and `h` = heavy blocks first, FlashBlock in wgsl/attention-flash.ts; see
 * WebGpuBackendOptions.attentionBlocks); "trusted" is "auto" with the flash kernels compiled
 * without naga's runtime checks (trustedShaders ["attention_flash_"]), also with ":blocks". "coop"
 * runs the tensor-core kernels (wgsl/attention-coop.ts; tensorCores true, so our wgpu build:
 * ZEROMOE_WGPU=coop), optionally with blocks `coop:fwd=4x4+dq=4x2+dkv=4x2` (subgroups × 16-wide
 * inner fragments, CoopAttnBlock), compiled trusted as by default; "coop-checked" the same with
 * naga's runtime checks on the attention kernels; "coop-emulated" the plain-WGSL emulation (any
 * device with shader-f16: a check of this script off the GPU, not a speed). The coop kernels also run the pre-passes (max |x|,
 * exponents, f16 packing of q, k, v and dout) that the times include. FLOPs count the causal half of the score matrix, 2 FLOPs per multiply-add:
 * forward 2 matmuls (Q·Kᵀ, P·V) = 4·B·H·S²·D/2; backward the 5 of FlashAttention-2's algorithm
 * (recompute S, dP = dO·Vᵀ, dV, dK, dQ) = 10·B·H·S²·D/2 (the kernels here run 7: the dQ kernel
 * recomputes S and dP, see wgsl/attention-flash.ts; the reported TFLOP/s uses the 5-matmul count).
 * Bytes: the forward reads q, k, v and writes out, lse; the backward reads q, k, v, out, dout, lse
 * and writes dq, dk, dv (f32). Floors use 67 TFLOP/s (H200 FP32 non-tensor peak; 989 for the
 * tensor-core kernels, dense f16) and 4.8 TB/s.
 * Every mode's result is compared with the first mode's (max abs difference printed).
 */
import { createBackend, type Backend, type CoopAttnBlock, type FlashBlock, type View, type WebGpuBackend } from "@zeromoe/kernels";
import { randomF32 as rand } from "@zeromoe/kernels/testing";
import { spawnSync } from "node:child_process";

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

const shapes = arg("shapes", "16x256x8x8x64,8x1024x16x8x64").split(",").map((s) => s.split("x").map(Number) as [number, number, number, number, number]);
const modes = arg("modes", "auto,tiled").split(",");

/** `coop[:fwd=4x4+dq=…]` / `coop-checked[:…]` → backend options (tensor-core attention). */
function coopOptions(m: string, spec: string | undefined): Record<string, unknown> {
  const blocks: Record<string, CoopAttnBlock> = {};
  for (const part of spec ? spec.split("+") : []) {
    const mm = /^(fwd|dq|dkv)=(\d+)x(\d+)$/.exec(part);
    if (!mm) {
      console.error(`attention-bench: --modes: bad tensor-core block "${part}" (expected e.g. fwd=4x4: subgroups x 16-wide fragments of the inner block)`);
      process.exit(2);
    }
    blocks[mm[1]!] = { sg: Number(mm[2]), kf: Number(mm[3]) };
  }
  return { attention: "auto", tensorCores: m === "coop-emulated" ? "emulated" : true, ...(spec ? { attentionCoopBlocks: blocks } : {}), ...(m === "coop-checked" ? { trustedShaders: ["attention_flash_", "mmc_"] } : {}) };
}

/** `auto:fwd=64x32r4+dq=…` (or `trusted:…`, `coop…`) → backend options. */
function modeOptions(mode: string): Record<string, unknown> {
  const [m, spec] = mode.split(":");
  if (m === "coop" || m === "coop-checked" || m === "coop-emulated") return coopOptions(m, spec);
  if (!["auto", "tiled", "rows", "trusted"].includes(m!)) {
    console.error(`attention-bench: --modes: unknown mode "${mode}" (expected auto, tiled, rows, trusted, coop, coop-checked or coop-emulated, optionally followed by :blocks)`);
    process.exit(2);
  }
  const trusted = m === "trusted" ? { trustedShaders: ["attention_flash_"] } : {};
  if (!spec) return { attention: m === "trusted" ? "auto" : (m as "auto"), ...trusted };
  const blocks: Record<string, FlashBlock> = {};
  for (const part of spec.split("+")) {
    const mm = /^(fwd|dq|dkv)=(\d+)x(\d+)r([24])(p?)(h?)$/.exec(part);
    if (!mm) {
      console.error(`attention-bench: --modes: bad block "${part}" (expected e.g. dq=64x16r4, with p for prefetch and h for heavy-first order: dq=64x16r4ph)`);
      process.exit(2);
    }
    blocks[mm[1]!] = { rows: Number(mm[2]), cols: Number(mm[3]), rpt: Number(mm[4]) as 2 | 4, prefetch: mm[5] === "p", heavyFirst: mm[6] === "h" };
  }
  return { attention: "auto", attentionBlocks: blocks, ...trusted };
}
const reps = Number(arg("reps", "10"));
const PEAK = 67e12;
/** H200 dense f16 tensor-core peak, the floor of the "coop" modes. */
const PEAK_TC = 989e12;
const BW = 4.8e12;

const torchDtype = arg("torch", "");
if (torchDtype) {
  if (!["fp32", "bf16", "fp16"].includes(torchDtype)) {
    console.error(`attention-bench: --torch: expected fp32, bf16 or fp16, got "${torchDtype}"`);
    process.exit(2);
  }
  const script = new URL("./torch_attention.py", import.meta.url).pathname;
  const shapeArg = shapes.map((x) => x.join("x")).join(",");
  const r = spawnSync(process.env.PYTHON ?? "python3", [script, "--dtype", torchDtype, "--shapes", shapeArg], { stdio: ["ignore", "inherit", "inherit"] });
  if (r.status !== 0) console.error(`attention-bench: torch_attention.py exited with ${r.status ?? r.signal ?? r.error?.message} (continuing with the WebGPU modes)`);
}

const firstResult = new Map<string, Float32Array[]>();
for (const mode of modes) {
  const be = (await createBackend("webgpu", { ...modeOptions(mode), profile: true })).backend as WebGpuBackend;
  console.log(`mode ${mode}: adapter ${be.info.adapter}, workgroup storage ${be.device.limits.maxComputeWorkgroupStorageSize} B, tensor cores ${be.tensorCoresStatus}`);
  for (const [B, S, H, Hkv, D] of shapes) {
    const nq = B * S * H * D;
    const nk = B * S * Hkv * D;
    const put = (data: Float32Array): View => {
      const v = { buf: (be as Backend).alloc("f32", Math.max(data.length, 1), "other"), off: 0 };
      be.write(v, data);
      return v;
    };
    const q = put(rand(nq, 1)), k = put(rand(nk, 2)), v = put(rand(nk, 3)), dout = put(rand(nq, 4));
    const out = put(new Float32Array(nq)), lse = put(new Float32Array(B * H * S));
    const dq = put(new Float32Array(nq)), dk = put(new Float32Array(nk)), dv = put(new Float32Array(nk));
    const scale = 1 / Math.sqrt(D);
    const fwd = () => be.attention(q, k, v, out, lse, B, S, H, Hkv, D, scale);
    const bwd = () => be.attentionBackward(q, k, v, out, lse, dout, dq, dk, dv, B, S, H, Hkv, D, scale);
    fwd();
    bwd();
    await be.profile();
    be.resetProfile();
    for (let r = 0; r < reps; r++) fwd();
    const fRows = await be.profile();
    be.resetProfile();
    for (let r = 0; r < reps; r++) bwd();
    const bRows = await be.profile();
    be.resetProfile();
    const fMs = fRows.reduce((a, x) => a + x.ns, 0) / 1e6 / reps;
    const bMs = bRows.reduce((a, x) => a + x.ns, 0) / 1e6 / reps;
    const fFlop = (4 * B * H * S * S * D) / 2;
    const bFlop = (10 * B * H * S * S * D) / 2;
    const fBytes = 4 * (2 * nq + 2 * nk + B * H * S);
    const bBytes = 4 * (3 * nq + 4 * nk + B * H * S);
    const peak = be.attentionKernels(D) === "coop" ? PEAK_TC : PEAK;
    const floor = (fl: number, by: number) => Math.max(fl / peak, by / BW) * 1e3;
    const res = await Promise.all([out, lse, dq, dk, dv].map(async (x, i) => Float32Array.from((await be.read(x, [nq, B * H * S, nq, nk, nk][i]!)) as Float32Array)));
    const key = `${B}x${S}x${H}x${Hkv}x${D}`;
    let diff = "";
    const ref = firstResult.get(key);
    if (!ref) firstResult.set(key, res);
    else diff = ` max|Δ| vs ${modes[0]}: ${res.map((x, i) => x.reduce((m, y, j) => Math.max(m, Math.abs(y - ref[i]![j]!)), 0).toExponential(1)).join("/")}`;
    console.log(
      JSON.stringify({
        mode, kernels_used: be.attentionKernels(D), shape: key,
        fwd_ms: +fMs.toFixed(3), fwd_tflops: +(fFlop / fMs / 1e9).toFixed(2), fwd_floor_ms: +floor(fFlop, fBytes).toFixed(3),
        bwd_ms: +bMs.toFixed(3), bwd_tflops: +(bFlop / bMs / 1e9).toFixed(2), bwd_floor_ms: +floor(bFlop, bBytes).toFixed(3),
        kernels: [...fRows, ...bRows].map((r) => `${r.label} ${(r.ns / 1e6 / reps).toFixed(3)}`),
      }) + diff,
    );
    for (const x of [q, k, v, dout, out, lse, dq, dk, dv]) be.free(x.buf);
  }
  be.destroy();
}
