/**
 * Tensor cores from WGSL: the cooperative-matrix probe and the tiled f16 matmul
 * (kernels/src/wgsl/matmul-coop*.ts) on the first adapter, through our own wgpu library.
 *
 *   ZEROMOE_WGPU=coop bun kernels/bench/matmul-coop.ts [--shapes square_4096,med_expert_fwd,…]
 *       [--input f16|f32|both] [--probe-iters 256] [--target-ms 60] [--json out.json]
 *
 * 1. Lists the driver's cooperative-matrix configurations; for each one WGSL can express (square
 *    8/16, f16/f32) runs a probe (register-only coopMultiplyAdd chains) and reports TFLOP/s.
 * 2. The tiled kernel at each shape (core/bench/matmul-shapes.json names: [M, N, K, transA, transB,
 *    accumulate]; default 4096³ and the mixtral-med step shapes): TFLOP/s from wall time around
 *    back-to-back dispatches in one submit (after warm-up), and the worst relative error of 64
 *    sampled outputs against a float64 dot product of the same f16-rounded inputs:
 *    |out − ref| / Σ|a·b| (tolerance 2e-3: f16 products are exact in f32, so this bounds the f32
 *    accumulation order; exceeding it makes the run exit 1).
 * Inputs: uniform in [-1, 1) from a fixed LCG (never zeros), rounded to f16.
 * Exit 2 with one line when the adapter cannot run the kernel (the reason says why).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createGPU } from "../src/ffi/index.ts";
import { formatCoopConfig } from "../src/ffi/cooperative-matrix.ts";
import { libraryKind, loadNative } from "../src/ffi/native.ts";
import { f16FromF32, f16ToNumber } from "../src/numerics/index.ts";
import { coopProbeWGSL, type CoopProbeShape } from "../src/wgsl/matmul-coop-wgsl.ts";
import { COOP_FEATURES, CoopMatmul, coopSupport } from "../src/wgsl/matmul-coop.ts";

const TOLERANCE = 2e-3;

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

function fail(msg: string): never {
  console.error(`matmul-coop: ${msg}`);
  process.exit(2);
}

const SHAPES = JSON.parse(readFileSync(new URL("../../core/bench/matmul-shapes.json", import.meta.url), "utf8")) as Record<string, unknown>;
const names = arg("shapes", "square_4096,med_qo_proj_fwd,med_kv_proj_fwd,med_proj_dX,med_qo_proj_dW,med_kv_proj_dW,med_head_fwd,med_head_dX,med_head_dW,med_expert_fwd,med_expert_dX,med_expert_dW").split(",");
for (const n of names) if (!Array.isArray(SHAPES[n])) fail(`--shapes: unknown shape '${n}' (names in core/bench/matmul-shapes.json)`);
const inputs = arg("input", "f16") === "both" ? (["f16", "f32"] as const) : arg("input", "f16") === "f32" ? (["f32"] as const) : (["f16"] as const);
const probeIters = Number(arg("probe-iters", "256"));
const targetMs = Number(arg("target-ms", "60"));

const gpu = createGPU();
const kind = libraryKind(loadNative());
const adapter = (await gpu.requestAdapter({ powerPreference: "high-performance" })) ?? fail("no adapter");
const support = coopSupport(adapter);
console.log(`library ${kind}; adapter ${adapter.info.device || adapter.info.description}`);
console.log(`cooperative-matrix configurations: ${support.configs ? support.configs.map(formatCoopConfig).join(", ") || "none" : "not listed"}`);
if (!support.ok) fail(`the tensor-core matmul cannot run here: ${support.reason}`);
const device = await adapter.requestDevice({
  requiredFeatures: [...COOP_FEATURES, ...(adapter.features.has("timestamp-query") ? (["timestamp-query"] as GPUFeatureName[]) : [])],
  requiredLimits: {
    maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  },
});

async function timeDispatches(encode: (pass: GPUComputePassEncoder) => void, reps: number): Promise<number> {
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  for (let i = 0; i < reps; i++) encode(pass);
  pass.end();
  const t0 = performance.now();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  return (performance.now() - t0) / 1e3;
}

/** Time `encode` back to back: warm up ~1 s of GPU work at most, then ≥ targetMs of timed dispatches; median of 3. */
async function measure(encode: (pass: GPUComputePassEncoder) => void): Promise<number> {
  const one = await timeDispatches(encode, 1);
  let reps = Math.max(3, Math.min(2000, Math.ceil(targetMs / 1e3 / Math.max(one, 1e-6))));
  await timeDispatches(encode, reps); // warm-up (clocks up)
  const single = (await timeDispatches(encode, reps)) / reps;
  reps = Math.max(3, Math.min(5000, Math.ceil(targetMs / 1e3 / Math.max(single, 1e-7))));
  const runs: number[] = [];
  for (let t = 0; t < 3; t++) runs.push((await timeDispatches(encode, reps)) / reps);
  return runs.sort((x, y) => x - y)[1]!;
}

const result: Record<string, unknown> = { library: kind, adapter: adapter.info.device || adapter.info.description, configs: support.configs, probes: [] as unknown[], matmuls: [] as unknown[], tolerance: TOLERANCE };

// ---- 1. probe every expressible configuration -----------------------------------------------
for (const c of support.configs ?? []) {
  const label = formatCoopConfig(c);
  if (!(c.M === c.N && c.N === c.K && (c.M === 8 || c.M === 16) && (c.abType === "f16" || c.abType === "f32") && (c.crType === "f16" || c.crType === "f32"))) {
    (result.probes as unknown[]).push({ config: label, skipped: "not expressible in WGSL (naga 30: square 8/16, f16/f32 only)" });
    console.log(`probe ${label}: skipped (not expressible in WGSL)`);
    continue;
  }
  const shape: CoopProbeShape = { size: c.M as 8 | 16, ab: c.abType as "f16" | "f32", cr: c.crType as "f16" | "f32" };
  const wgs = 132 * 16;
  try {
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ code: coopProbeWGSL(shape, probeIters) });
    const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
    const el = (t: string) => (t === "f16" ? 2 : 4);
    const src = device.createBuffer({ size: Math.max(16, 2 * c.M * c.M * el(shape.ab)), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    const dst = device.createBuffer({ size: wgs * 8 * 4 * c.M * c.M * el(shape.cr), usage: GPUBufferUsage.STORAGE });
    const bg = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }] });
    const err = await device.popErrorScope();
    if (err) throw new Error(err.message);
    const s = await measure((p) => {
      p.setPipeline(pipeline);
      p.setBindGroup(0, bg);
      p.dispatchWorkgroups(wgs);
    });
    const flop = wgs * 8 * probeIters * 4 * 2 * c.M ** 3;
    (result.probes as unknown[]).push({ config: label, tflops: flop / s / 1e12, seconds: s, workgroups: wgs, iters: probeIters });
    console.log(`probe ${label}: ${(flop / s / 1e12).toFixed(1)} TFLOP/s`);
    src.destroy();
    dst.destroy();
  } catch (e) {
    (result.probes as unknown[]).push({ config: label, error: (e as Error).message.split("\n").slice(0, 6).join(" | ") });
    console.log(`probe ${label}: ERROR ${(e as Error).message.split("\n").slice(0, 6).join(" | ")}`);
  }
}

// ---- 2. the tiled kernel at the step shapes --------------------------------------------------
const coop = new CoopMatmul(device);
let seed = 12345;
const rnd = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return (seed / 2 ** 32) * 2 - 1 || 0.5;
};
let bad = false;
for (const name of names) {
  const [M, N, K, transA, transB, accumulate] = SHAPES[name] as [number, number, number, boolean, boolean, boolean];
  const aCols = transA ? M : K;
  const bCols = transB ? K : N;
  const a16 = new Uint16Array(M * K), b16 = new Uint16Array(K * N);
  for (let i = 0; i < a16.length; i++) a16[i] = f16FromF32(rnd());
  for (let i = 0; i < b16.length; i++) b16[i] = f16FromF32(rnd());
  const aVal = (m: number, k: number) => f16ToNumber(a16[transA ? k * aCols + m : m * aCols + k]!);
  const bVal = (k: number, n: number) => f16ToNumber(b16[transB ? n * bCols + k : k * bCols + n]!);
  for (const input of inputs) {
    const up = (bits: Uint16Array) => {
      if (input === "f16") return bits;
      const f = new Float32Array(bits.length);
      for (let i = 0; i < bits.length; i++) f[i] = f16ToNumber(bits[i]!);
      return f;
    };
    const mk = (data: Uint16Array | Float32Array) => {
      const bytes = new Uint8Array(Math.ceil(data.byteLength / 4) * 4);
      bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      const buf = device.createBuffer({ size: bytes.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
      device.queue.writeBuffer(buf, 0, bytes.buffer, 0, bytes.byteLength);
      return buf;
    };
    const A = mk(up(a16)), B = mk(up(b16));
    const outBytes = M * N * 4;
    const out = device.createBuffer({ size: outBytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    const read = device.createBuffer({ size: outBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    // correctness first (no accumulate: out = A·B), then timing with the shape's accumulate flag
    let check: ReturnType<CoopMatmul["prepare"]>, timed: ReturnType<CoopMatmul["prepare"]>;
    try {
      device.pushErrorScope("validation");
      check = coop.prepare({ M, N, K, transA, transB }, input, A, B, out);
      timed = coop.prepare({ M, N, K, transA, transB, accumulate }, input, A, B, out);
      const err = await device.popErrorScope();
      if (err) throw new Error(err.message);
    } catch (e) {
      bad = true;
      const msg = (e as Error).message.split("\n").slice(0, 12).join(" | ");
      (result.matmuls as unknown[]).push({ name, input, error: msg });
      console.log(`${name} ${input}: ERROR ${msg}`);
      continue;
    }
    {
      const enc = device.createCommandEncoder();
      const p = enc.beginComputePass();
      p.setPipeline(check.pipeline);
      p.setBindGroup(0, check.bindGroup);
      p.dispatchWorkgroups(...check.workgroups);
      p.end();
      enc.copyBufferToBuffer(out, 0, read, 0, outBytes);
      device.queue.submit([enc.finish()]);
    }
    await read.mapAsync(GPUMapMode.READ);
    const got = new Float32Array(read.getMappedRange().slice(0));
    read.unmap();
    let worst = 0;
    for (let s = 0; s < 64; s++) {
      const m = s < 8 ? M - 1 - s : s < 16 ? s - 8 : Math.floor(rnd() * 0.5 * M + M / 2) % M;
      const n = s % 3 === 0 ? N - 1 - (s % 5) : Math.floor(Math.abs(rnd()) * N) % N;
      if (m < 0 || n < 0) continue;
      let ref = 0, mag = 0;
      for (let k = 0; k < K; k++) {
        const p = aVal(m, k) * bVal(k, n);
        ref += p;
        mag += Math.abs(p);
      }
      worst = Math.max(worst, Math.abs(got[m * N + n]! - ref) / (mag || 1));
    }
    const s = await measure((p) => {
      p.setPipeline(timed.pipeline);
      p.setBindGroup(0, timed.bindGroup);
      p.dispatchWorkgroups(...timed.workgroups);
    });
    const tflops = (2 * M * N * K) / s / 1e12;
    const ok = worst <= TOLERANCE;
    if (!ok) bad = true;
    (result.matmuls as unknown[]).push({ name, M, N, K, transA, transB, accumulate, input, seconds: s, tflops, maxRelErr: worst, ok });
    console.log(`${name.padEnd(18)} ${input} ${M}x${N}x${K} ${transA ? "T" : "N"}${transB ? "T" : "N"}${accumulate ? "+" : " "} ${tflops.toFixed(1).padStart(7)} TFLOP/s  ${(s * 1e3).toFixed(3)} ms  max rel err ${worst.toExponential(2)} ${ok ? "ok" : "FAIL"}`);
    for (const x of [A, B, out, read, check.params, timed.params]) x.destroy();
  }
}
const json = arg("json", "");
if (json) writeFileSync(json, JSON.stringify(result, null, 1));
device.destroy();
process.exit(bad ? 1 : 0);
