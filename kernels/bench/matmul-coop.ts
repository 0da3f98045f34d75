/**
 * Tensor cores from WGSL: the cooperative-matrix probe and the tiled f16 matmul
 * (kernels/src/wgsl/matmul-coop*.ts) on the first adapter, through our own wgpu library.
 *
 *   ZEROMOE_WGPU=coop bun kernels/bench/matmul-coop.ts [--shapes square_4096,med_expert_fwd,…]
 *       [--sweep-shapes square_4096] [--tiles 128x128x32-2x4-s2,128x256x32-4x4-s1,256x128x32-8x2-s1]
 *       [--epilogues scratch,direct] [--trusted off,on] [--variants tile:epilogue:on|off[:guard[:staging]],…]
 *       [--top 2] [--split-k 2,4,8]
 *       [--input f16|f32|both] [--f32-best] [--probe] [--feed-probe] [--probe-iters 256] [--samples 256]
 *       [--target-ms 60] [--gen xorshift|lcg] [--emulate] [--json out.json]
 *
 * 1. With --probe: lists the driver's cooperative-matrix configurations; for each one WGSL can
 *    express (square 8/16, f16/f32) runs a probe (register-only coopMultiplyAdd chains). With
 *    --feed-probe: the 128x256x32-4x4 tile's multiply phase with its fragments loaded from
 *    workgroup memory, then from a storage buffer (L1), no staging (matmul-coop-probe.ts
 *    coopFeedProbeWGSL): the ceilings of the staged kernels and of the "none" staging.
 * 2. Sweep: every variant (tile × epilogue × trusted, or the --variants list) at each
 *    --sweep-shapes shape. "trusted": compiled without naga's runtime checks.
 * 3. Shapes: the --top best variants of the sweep (by TFLOP/s at the first sweep shape) and the
 *    default variant (128x128x32-2x4-s2, scratch, checked; not with --no-default) at each --shapes shape
 *    (core/bench/matmul-shapes.json names: [M, N, K, transA, transB, accumulate]); for the
 *    weight-gradient layout (TN) also split-K with each --split-k count, with the best variant.
 *    Shapes may also be literal: MxNxK + layout (NN, NT, TN, TT) + optional "+" (accumulate).
 * 4. With --f32-best: the best and the default variant on f32 operands at the first sweep shape.
 * TFLOP/s from wall time around back-to-back dispatches in one submit (after warm-up), median of 3.
 * Errors: the worst relative error of --samples sampled outputs against a float64 dot product of
 * the same f16-rounded inputs: |out − ref| / Σ|a·b| (tolerance 2e-3: f16 products are exact in
 * f32, so this bounds the f32 accumulation order; exceeding it makes the run exit 1); with the
 * position of the worst sample and the count above 1e-6.
 * Inputs: uniform in [-1, 1) from a fixed xorshift generator (never zeros), rounded to f16
 * (--gen lcg: the generator of earlier runs, see below).
 * Exit 2 with one line when the adapter cannot run the kernel or an option is malformed.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createGPU } from "../src/ffi/index.ts";
import { formatCoopConfig } from "../src/ffi/cooperative-matrix.ts";
import { libraryKind, loadNative } from "../src/ffi/native.ts";
import { f16FromF32, f16ToNumber } from "../src/numerics/index.ts";
import { xorshift32 } from "../src/testing.ts";
import { coopFeedProbeWGSL, coopProbeWGSL, type CoopProbeShape } from "../src/wgsl/matmul-coop-probe.ts";
import { COOP_FEATURES, CoopMatmul, coopDirectEpilogueOk, coopSupport, type CoopDispatch } from "../src/wgsl/matmul-coop.ts";
import { COOP_DEFAULT_TILE, coopTileName, parseCoopTile, type CoopTile } from "../src/wgsl/matmul-coop-tile.ts";

const TOLERANCE = 2e-3;

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

function fail(msg: string): never {
  console.error(`matmul-coop: ${msg}`);
  process.exit(2);
}

function list<T extends string>(name: string, def: string, allowed: readonly T[]): T[] {
  const v = arg(name, def).split(",").filter(Boolean);
  for (const x of v) if (!allowed.includes(x as T)) fail(`--${name}: '${x}' is not one of ${allowed.join(", ")}`);
  return v as T[];
}

function posInt(name: string, def: string): number {
  const v = Number(arg(name, def));
  if (!Number.isInteger(v) || v < 1) fail(`--${name}: expected a positive integer, got '${arg(name, def)}'`);
  return v;
}

const SHAPES = JSON.parse(readFileSync(new URL("../../core/bench/matmul-shapes.json", import.meta.url), "utf8")) as Record<string, unknown>;
/** Shape names of core/bench/matmul-shapes.json, or literal shapes `MxNxK` + layout `NN|NT|TN|TT` + optional `+` (accumulate), e.g. 200x96x300TN+. */
const shapeNames = (name: string, def: string) => {
  const v = arg(name, def).split(",").filter(Boolean);
  for (const n of v) {
    const lit = /^(\d+)x(\d+)x(\d+)([NT])([NT])(\+?)$/.exec(n);
    if (lit) SHAPES[n] = [+lit[1]!, +lit[2]!, +lit[3]!, lit[4] === "T", lit[5] === "T", lit[6] === "+"];
    else if (!Array.isArray(SHAPES[n])) fail(`--${name}: unknown shape '${n}' (names in core/bench/matmul-shapes.json, or MxNxK{N|T}{N|T}[+])`);
  }
  return v;
};
const names = shapeNames("shapes", "square_4096,med_qo_proj_fwd,med_kv_proj_fwd,med_proj_dX,med_qo_proj_dW,med_kv_proj_dW,med_head_fwd,med_head_dX,med_head_dW,med_expert_fwd,med_expert_dX,med_expert_dW");
const sweepNames = shapeNames("sweep-shapes", "square_4096");
let tiles: CoopTile[];
try {
  // default: the default block and the two fastest of the first H200 sweep (docs/performance.md)
  tiles = arg("tiles", `${coopTileName(COOP_DEFAULT_TILE)},128x256x32-4x4-s1,256x128x32-8x2-s1`).split(",").map(parseCoopTile);
} catch (e) {
  fail(`--tiles: ${(e as Error).message}`);
}
const epilogues = list("epilogues", "scratch,direct", ["scratch", "direct"] as const);
const trustedModes = list("trusted", "off,on", ["off", "on"] as const);
const inputs = list("input", "f16", ["f16", "f32", "both"] as const).includes("both") ? (["f16", "f32"] as const) : list("input", "f16", ["f16", "f32"] as const);
const top = posInt("top", "2");
const splitKs = arg("split-k", "2,4,8").split(",").filter(Boolean).map((x) => (Number.isInteger(+x) && +x >= 2 ? +x : fail(`--split-k: expected integers ≥ 2, got '${x}'`)));
const probeIters = posInt("probe-iters", "256");
const samples = posInt("samples", "256");
const targetMs = posInt("target-ms", "60");

const gpu = createGPU();
const kind = libraryKind(loadNative());
const adapter = (await gpu.requestAdapter({ powerPreference: "high-performance" })) ?? fail("no adapter");
// --emulate: plain-WGSL stand-ins for the cooperative matrices (matmul-coop-wgsl.ts), to try the
// bench's logic on a device without them (lavapipe); its timings mean nothing.
const emulate = process.argv.includes("--emulate");
const support = emulate ? { ok: adapter.features.has("shader-f16"), reason: "emulation needs shader-f16", configs: [] } : coopSupport(adapter);
console.log(`library ${kind}; adapter ${adapter.info.device || adapter.info.description}`);
console.log(`cooperative-matrix configurations: ${support.configs ? support.configs.map(formatCoopConfig).join(", ") || "none" : "not listed"}`);
if (!support.ok) fail(`the tensor-core matmul cannot run here: ${support.reason}`);
const device = await adapter.requestDevice({
  requiredFeatures: emulate ? ["shader-f16"] : [...COOP_FEATURES],
  requiredLimits: {
    maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: adapter.limits.maxComputeWorkgroupSizeX,
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  },
});
console.log(`workgroup memory ${device.limits.maxComputeWorkgroupStorageSize} bytes`);

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

/** Time `encode` back to back: warm up ~targetMs of GPU work, then ≥ targetMs of timed dispatches; median of 3. */
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

const result: Record<string, unknown> = { library: kind, adapter: adapter.info.device || adapter.info.description, configs: support.configs, probes: [] as unknown[], sweep: [] as unknown[], matmuls: [] as unknown[], tolerance: TOLERANCE };

// ---- 1. probe every expressible configuration -----------------------------------------------
if (process.argv.includes("--probe")) {
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
}

// ---- 1b. the multiply phase fed from workgroup memory / from storage (L1), no staging ----------
if (process.argv.includes("--feed-probe")) {
  for (const source of ["workgroup", "storage"] as const) {
    const wgs = 132 * 4;
    try {
      device.pushErrorScope("validation");
      const module = device.createShaderModule({ code: coopFeedProbeWGSL(source, probeIters) });
      const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
      const src = device.createBuffer({ size: 2 * (128 * 40 + 32 * 264), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
      const dst = device.createBuffer({ size: wgs * 16 * 2048 * 4, usage: GPUBufferUsage.STORAGE });
      const bg = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }] });
      const err = await device.popErrorScope();
      if (err) throw new Error(err.message);
      const s = await measure((p) => {
        p.setPipeline(pipeline);
        p.setBindGroup(0, bg);
        p.dispatchWorkgroups(wgs);
      });
      const flop = wgs * 16 * probeIters * 8 * 2 * 16 ** 3;
      (result.probes as unknown[]).push({ config: `feed ${source}`, tflops: flop / s / 1e12, seconds: s, workgroups: wgs, iters: probeIters });
      console.log(`feed probe (2x4 fragments per subgroup, 16 subgroups, fragments from ${source}): ${(flop / s / 1e12).toFixed(1)} TFLOP/s`);
      src.destroy();
      dst.destroy();
    } catch (e) {
      (result.probes as unknown[]).push({ config: `feed ${source}`, error: (e as Error).message.split("\n").slice(0, 6).join(" | ") });
      console.log(`feed probe ${source}: ERROR ${(e as Error).message.split("\n").slice(0, 6).join(" | ")}`);
    }
  }
}

// ---- the problems: operands, buffers, sampled float64 references ------------------------------
// --gen lcg: the linear congruential generator this bench used before (x ← 1103515245·x + 12345
// mod 2³²). Its draws 2²³ apart agree in their low 25 bits up to a constant, so for
// med_qo_proj_dW (A and B 2²³ elements each) B nearly repeats A and the diagonal outputs are
// Σ a·(a + δ) without cancellation; kept to reproduce that case (docs/performance.md).
const gen = arg("gen", "xorshift");
if (gen !== "xorshift" && gen !== "lcg") fail(`--gen: expected xorshift or lcg, got '${gen}'`);
let lcgState = 12345;
const u32 = gen === "lcg"
  ? () => (lcgState = (Math.imul(lcgState, 1103515245) + 12345) >>> 0)
  : xorshift32(0x9e3779b9);
const rnd = () => (u32() / 2 ** 32) * 2 - 1 || 0.5;

interface Problem {
  name: string;
  M: number;
  N: number;
  K: number;
  transA: boolean;
  transB: boolean;
  accumulate: boolean;
  input: "f16" | "f32";
  A: GPUBuffer;
  B: GPUBuffer;
  out: GPUBuffer;
  read: GPUBuffer;
  /** Sampled outputs: (m, n, float64 reference, Σ|a·b|). */
  refs: { m: number; n: number; ref: number; mag: number }[];
}

function makeProblem(name: string, input: "f16" | "f32"): Problem {
  const [M, N, K, transA, transB, accumulate] = SHAPES[name] as [number, number, number, boolean, boolean, boolean];
  const aCols = transA ? M : K;
  const bCols = transB ? K : N;
  const a16 = new Uint16Array(M * K), b16 = new Uint16Array(K * N);
  for (let i = 0; i < a16.length; i++) a16[i] = f16FromF32(rnd());
  for (let i = 0; i < b16.length; i++) b16[i] = f16FromF32(rnd());
  const aVal = (m: number, k: number) => f16ToNumber(a16[transA ? k * aCols + m : m * aCols + k]!);
  const bVal = (k: number, n: number) => f16ToNumber(b16[transB ? n * bCols + k : k * bCols + n]!);
  const refs: Problem["refs"] = [];
  for (let s = 0; s < samples; s++) {
    // corners and edges of the output first, then random positions
    const m = s < 8 ? M - 1 - s : s < 16 ? s - 8 : Math.floor(((rnd() + 1) / 2) * M) % M;
    const n = s % 3 === 0 ? N - 1 - (s % 5) : Math.floor(((rnd() + 1) / 2) * N) % N;
    if (m < 0 || n < 0) continue;
    let ref = 0, mag = 0;
    for (let k = 0; k < K; k++) {
      const p = aVal(m, k) * bVal(k, n);
      ref += p;
      mag += Math.abs(p);
    }
    refs.push({ m, n, ref, mag });
  }
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
  const outBytes = M * N * 4;
  return {
    name, M, N, K, transA, transB, accumulate, input, refs,
    A: mk(up(a16)),
    B: mk(up(b16)),
    out: device.createBuffer({ size: outBytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST }),
    read: device.createBuffer({ size: outBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
  };
}

function destroyProblem(p: Problem): void {
  for (const x of [p.A, p.B, p.out, p.read]) x.destroy();
}

interface Variant {
  tile: CoopTile;
  epilogue: "scratch" | "direct";
  trusted: boolean;
  /** Split-K chunks (1: none). */
  splitK: number;
  guard: "branch" | "select";
  /** Operand staging (matmul-coop-wgsl.ts): "regs" (vector loads, default width), "regs8"
   * (16-byte loads), "coop" (fragment loads + coopStore), "none" (fragments from memory). */
  staging: "regs" | "regs8" | "coop" | "none";
}
const variantName = (v: Variant) => `${coopTileName(v.tile)} ${v.epilogue} ${v.trusted ? "trusted" : "checked"} ${v.guard}${v.staging !== "regs" ? ` ${v.staging}` : ""}${v.splitK > 1 ? ` split-k ${v.splitK}` : ""}`;
const coops = { checked: new CoopMatmul(device, { emulate }), trusted: new CoopMatmul(device, { trusted: true, emulate }) };

/** The dispatches of `v` on `p` (accumulate as given), plus buffers to destroy. */
function prepare(p: Problem, v: Variant, accumulate: boolean): { dispatches: CoopDispatch[]; buffers: GPUBuffer[] } {
  const coop = v.trusted ? coops.trusted : coops.checked;
  const call = { M: p.M, N: p.N, K: p.K, transA: p.transA, transB: p.transB, accumulate, tile: v.tile, epilogue: v.epilogue, guard: v.guard, staging: v.staging === "regs8" ? ("regs" as const) : v.staging, ...(v.staging === "regs8" ? { vec: 8 as const } : {}) };
  if (v.splitK > 1) return coop.prepareSplitK(call, v.splitK, p.input, p.A, p.B, p.out);
  const r = coop.prepare(call, p.input, p.A, p.B, p.out);
  return { dispatches: [r], buffers: [r.params] };
}

const encodeAll = (ds: CoopDispatch[]) => (pass: GPUComputePassEncoder) => {
  for (const d of ds) {
    pass.setPipeline(d.pipeline);
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(...d.workgroups);
  }
};

let bad = false;
/** Check (out = A·B against the sampled references) and time (with the shape's accumulate) one variant. */
async function run(p: Problem, v: Variant, into: unknown[]): Promise<{ tflops: number; seconds: number; maxRelErr: number } | null> {
  const label = `${p.name.padEnd(16)} ${p.input} ${p.M}x${p.N}x${p.K} ${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}${p.accumulate ? "+" : " "} ${variantName(v).padEnd(40)}`;
  let check: ReturnType<typeof prepare>, timed: ReturnType<typeof prepare>;
  const fragStaging = v.staging === "coop" || v.staging === "none";
  if (fragStaging && (p.input !== "f16" || p.M % v.tile.BM !== 0 || p.N % v.tile.BN !== 0 || (v.splitK > 1 ? Math.ceil(p.K / v.splitK) : p.K) % v.tile.BK !== 0)) {
    console.log(`${label} skipped (staging ${v.staging} needs f16 operands and block-multiple sizes)`);
    return null;
  }
  try {
    device.pushErrorScope("validation");
    check = prepare(p, v, false);
    timed = prepare(p, v, p.accumulate);
    const err = await device.popErrorScope();
    if (err) throw new Error(err.message);
  } catch (e) {
    bad = true;
    const msg = (e as Error).message.split("\n").slice(0, 12).join(" | ");
    into.push({ name: p.name, input: p.input, variant: variantName(v), error: msg });
    console.log(`${label} ERROR ${msg}`);
    return null;
  }
  {
    const enc = device.createCommandEncoder();
    enc.clearBuffer(p.out);
    const pass = enc.beginComputePass();
    encodeAll(check.dispatches)(pass);
    pass.end();
    enc.copyBufferToBuffer(p.out, 0, p.read, 0, p.M * p.N * 4);
    device.queue.submit([enc.finish()]);
  }
  await p.read.mapAsync(GPUMapMode.READ);
  const got = new Float32Array(p.read.getMappedRange().slice(0));
  p.read.unmap();
  let worst = 0, at = "", over = 0;
  for (const r of p.refs) {
    const e = Math.abs(got[r.m * p.N + r.n]! - r.ref) / (r.mag || 1);
    if (e > 1e-6) over++;
    if (e > worst) {
      worst = e;
      at = `(${r.m},${r.n}) got ${got[r.m * p.N + r.n]} ref ${r.ref.toPrecision(8)}`;
    }
  }
  const s = await measure(encodeAll(timed.dispatches));
  const tflops = (2 * p.M * p.N * p.K) / s / 1e12;
  const ok = worst <= TOLERANCE;
  if (!ok) bad = true;
  for (const b of [...check.buffers, ...timed.buffers]) b.destroy();
  into.push({ name: p.name, M: p.M, N: p.N, K: p.K, transA: p.transA, transB: p.transB, accumulate: p.accumulate, input: p.input, variant: variantName(v), seconds: s, tflops, maxRelErr: worst, worstAt: at, samplesAbove1e6: over, samples: p.refs.length, ok });
  console.log(`${label} ${tflops.toFixed(1).padStart(7)} TFLOP/s ${(s * 1e3).toFixed(3)} ms  max rel err ${worst.toExponential(2)} ${ok ? "ok" : "FAIL"}${over > 0 ? `  [${over}/${p.refs.length} samples > 1e-6, worst at ${at}]` : ""}`);
  return { tflops, seconds: s, maxRelErr: worst };
}

// ---- 2. sweep -----------------------------------------------------------------------------------
const variants: Variant[] = [];
if (arg("variants", "")) {
  // explicit list instead of the cross product: tile:epilogue:trusted, e.g. 128x256x32-2x4-s1:direct:on
  for (const spec of arg("variants", "").split(",")) {
    const [tn, ep, tr, gd = "select", st = "regs"] = spec.split(":");
    if (!(ep === "scratch" || ep === "direct") || !(tr === "on" || tr === "off") || !(gd === "branch" || gd === "select") || !(st === "regs" || st === "regs8" || st === "coop" || st === "none")) fail(`--variants: '${spec}' is not tile:scratch|direct:on|off[:branch|select[:regs|regs8|coop|none]]`);
    try {
      variants.push({ tile: parseCoopTile(tn!), epilogue: ep, trusted: tr === "on", splitK: 1, guard: gd, staging: st });
    } catch (e) {
      fail(`--variants: ${(e as Error).message}`);
    }
  }
} else {
  for (const tile of tiles) for (const epilogue of epilogues) for (const t of trustedModes) variants.push({ tile, epilogue, trusted: t === "on", splitK: 1, guard: "select", staging: "regs" });
}
const score = new Map<Variant, number>();
for (const name of sweepNames) {
  for (const input of inputs) {
    const p = makeProblem(name, input);
    console.log(`-- sweep ${name} ${input}`);
    for (const v of variants) {
      if (v.epilogue === "direct" && !coopDirectEpilogueOk(p)) continue;
      const r = await run(p, v, result.sweep as unknown[]);
      if (r && name === sweepNames[0] && input === inputs[0]) score.set(v, r.tflops);
    }
    destroyProblem(p);
  }
}
const ranked = [...score.entries()].sort((x, y) => y[1] - x[1]).map(([v]) => v);
const best = ranked.slice(0, top);
console.log(`-- best: ${best.map(variantName).join("; ")}`);
result.best = best.map(variantName);

// ---- 3. the shapes -----------------------------------------------------------------------------
const defaultVariant: Variant = { tile: COOP_DEFAULT_TILE, epilogue: "scratch", trusted: false, splitK: 1, guard: "select", staging: "regs" };
for (const name of names) {
  for (const input of inputs) {
    const p = makeProblem(name, input);
    console.log(`-- ${name} ${input}`);
    const vs = [...best];
    if (!process.argv.includes("--no-default") && !vs.some((v) => variantName(v) === variantName(defaultVariant))) vs.push(defaultVariant);
    if (p.transA && !p.transB && best[0]) for (const k of splitKs) vs.push({ ...best[0], splitK: k });
    const seen = new Set<string>();
    for (const v0 of vs) {
      // the direct epilogue needs M, N multiples of 16: elsewhere the same variant with the scratch one
      const v = v0.epilogue === "direct" && !coopDirectEpilogueOk(p) ? { ...v0, epilogue: "scratch" as const } : v0;
      if (seen.has(variantName(v))) continue;
      seen.add(variantName(v));
      await run(p, v, result.matmuls as unknown[]);
    }
    destroyProblem(p);
  }
}
// ---- 4. with --f32-best: f32 operands (rounded to f16 when staged) at the first sweep shape -----
if (process.argv.includes("--f32-best") && best[0]) {
  const p = makeProblem(sweepNames[0]!, "f32");
  console.log(`-- ${p.name} f32`);
  for (const v of [best[0], defaultVariant]) await run(p, v, result.matmuls as unknown[]);
  destroyProblem(p);
}
const json = arg("json", "");
if (json) writeFileSync(json, JSON.stringify(result, null, 1));
device.destroy();
process.exit(bad ? 1 : 0);
