/**
 * `bun run bench kernels`: matmul GFLOP/s (fp32, and f16 storage) for square sizes and elementwise
 * GB/s on the WebGPU device, beside references measured in the same run: the TypeScript CPU matmul
 * (small sizes only) and, where `python3` with CUDA PyTorch is present, kernels/bench/torch_matmul.py
 * on the same GPU.
 *
 * Flags:
 *   --sizes 256,512,1024,2048,4096   square matmul sizes (M = N = K)
 *   --cpu-max 256                    largest size the CPU reference runs at (0 = none)
 *   --elementwise N                  elements of the bandwidth test (default 2^26; 0 = skip)
 *   --tune                           also time every tile of the tuning set at every size
 *   --tune-sizes 2048,4096           restrict --tune to these sizes
 *   --tune-storage f32               restrict --tune to these storage types (f32, f16)
 *   --no-f16                         skip the f16-storage matmul
 *   --no-torch                       skip the PyTorch reference
 *   --json PATH                      write all results as JSON
 *   --batches N                      timed batches per measurement (default 5)
 * Every measured matmul is checked: 48 sampled outputs against a float64 dot product of the same
 * (f16-rounded, where applicable) inputs; a mismatch is reported and makes the run exit 1.
 */
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { matmulF, matmulGeometry } from "../src/cpu/matmul.ts";
import { f16FromNumber, f16ToNumber } from "../src/numerics/index.ts";
import { randomF32 } from "../src/testing.ts";
import { planMatmulFast, type MatmulFastOptions } from "../src/wgsl/matmul-fast.ts";
import { MatmulFastPipelines } from "../src/wgsl/matmul-fast-pipeline.ts";
import { MATMUL_TILES, tileFits, type MatmulLimits } from "../src/wgsl/matmul-fast-tiles.ts";
import { type MatmulStorage, type MatmulTile, tileKey } from "../src/wgsl/matmul-fast-wgsl.ts";
import { AFFINE_VEC4_WGSL, AFFINE_WORKGROUP, affineParams } from "./support/elementwise-wgsl.ts";
import { timeGpu } from "./support/gpu-timing.ts";
import { openBenchDevice } from "./support/open-gpu.ts";

/** Tiles timed with --tune: "small" for sizes below 2048, "big" from 2048 up. Every tile is timed
 * with vec4 and scalar global loads, each with and without the K loop unrolled by two. */
export const TUNE_TILES: Readonly<Record<"small" | "big", readonly MatmulTile[]>> = {
  small: [
    { BM: 32, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 },
    { BM: 64, BN: 64, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 },
    { BM: 64, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 },
    { BM: 64, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 },
    { BM: 128, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 },
    { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 },
    { BM: 32, BN: 64, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 },
    { BM: 64, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 },
  ],
  big: [
    { BM: 128, BN: 256, BK: 16, TM: 8, TN: 16, padA: 0, padB: 0 },
    { BM: 256, BN: 128, BK: 16, TM: 16, TN: 8, padA: 0, padB: 0 },
    { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 },
    { BM: 128, BN: 128, BK: 16, TM: 8, TN: 8, padA: 0, padB: 0 },
  ],
};

interface Args {
  sizes: number[]; tuneSizes: number[]; tuneStorage: MatmulStorage[]; cpuMax: number; elementwise: number; tune: boolean; f16: boolean; torch: boolean; json: string | null; batches: number;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { sizes: [256, 512, 1024, 2048, 4096], tuneSizes: [], tuneStorage: ["f32", "f16"], cpuMax: 256, elementwise: 1 << 26, tune: false, f16: true, torch: true, json: null, batches: 5 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const val = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`bench kernels: ${k} needs a value`);
      return v;
    };
    const int = (s: string): number => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 0) throw new Error(`bench kernels: ${k} expects a non-negative integer, got "${s}"`);
      return n;
    };
    if (k === "--sizes") a.sizes = val().split(",").map(int);
    else if (k === "--tune-sizes") a.tuneSizes = val().split(",").map(int);
    else if (k === "--tune-storage") a.tuneStorage = val().split(",").map((x) => {
      if (x !== "f32" && x !== "f16") throw new Error(`bench kernels: --tune-storage takes f32 and/or f16, got "${x}"`);
      return x;
    });
    else if (k === "--cpu-max") a.cpuMax = int(val());
    else if (k === "--elementwise") a.elementwise = int(val());
    else if (k === "--batches") a.batches = int(val());
    else if (k === "--tune") a.tune = true;
    else if (k === "--no-f16") a.f16 = false;
    else if (k === "--no-torch") a.torch = false;
    else if (k === "--json") a.json = val();
    else throw new Error(`bench kernels: unknown flag ${k}`);
  }
  return a;
}

interface MatmulResult {
  storage: MatmulStorage; size: number; tile: string; groupM: number; gflops: number; seconds: number; method: string; maxRelErr: number; ok: boolean;
}

/** One operand set on the device for an n×n×n matmul of a given storage type. */
class Operands {
  readonly a: GPUBuffer; readonly b: GPUBuffer; readonly c: GPUBuffer;
  /** Host copies of the inputs as the GPU sees them (f16-rounded for f16 storage). */
  readonly ha: Float32Array; readonly hb: Float32Array;
  constructor(readonly device: GPUDevice, readonly n: number, readonly storage: MatmulStorage) {
    const len = n * n;
    this.ha = randomF32(len, 12345 + n);
    this.hb = randomF32(len, 777 + n);
    const mk = (data: Float32Array): GPUBuffer => {
      let bytes: Uint8Array;
      if (storage === "f32") bytes = new Uint8Array(data.buffer);
      else {
        const h = new Uint16Array(len + (len & 1));
        for (let i = 0; i < len; i++) { h[i] = f16FromNumber(data[i]!); data[i] = f16ToNumber(h[i]!); }
        bytes = new Uint8Array(h.buffer);
      }
      const size = Math.max(16, Math.ceil(bytes.byteLength / 16) * 16);
      const buf = device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
      device.queue.writeBuffer(buf, 0, bytes);
      return buf;
    };
    this.a = mk(this.ha);
    this.b = mk(this.hb);
    this.c = device.createBuffer({ size: Math.max(16, len * 4), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  }
  destroy(): void { this.a.destroy(); this.b.destroy(); this.c.destroy(); }
}

/** Reads 48 sampled outputs and returns the largest |gpu − ref| / (Σ|a·b| + tiny) over them. */
async function checkSamples(device: GPUDevice, ops: Operands): Promise<number> {
  const n = ops.n, len = n * n;
  const rb = device.createBuffer({ size: len * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(ops.c, 0, rb, 0, len * 4);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const c = new Float32Array(rb.getMappedRange().slice(0));
  rb.unmap(); rb.destroy();
  let worst = 0;
  const idx = randomF32(96, 99 + n);
  for (let s = 0; s < 48; s++) {
    const i = Math.min(n - 1, Math.floor(((idx[2 * s]! + 1) / 2) * n)), j = Math.min(n - 1, Math.floor(((idx[2 * s + 1]! + 1) / 2) * n));
    let ref = 0, mag = 0;
    for (let k = 0; k < n; k++) { const p = ops.ha[i * n + k]! * ops.hb[k * n + j]!; ref += p; mag += Math.abs(p); }
    const err = Math.abs(c[i * n + j]! - ref) / (mag + 1e-30);
    if (!(err <= worst)) worst = err; // NaN propagates as a failure
  }
  return worst;
}

async function timeMatmul(device: GPUDevice, pipes: MatmulFastPipelines, ops: Operands, opts: MatmulFastOptions, batches: number, warmupSeconds = 0.3): Promise<MatmulResult> {
  const n = ops.n;
  const plan = planMatmulFast({ M: n, N: n, K: n }, 0, 0, 0, { ...opts, storage: ops.storage });
  const params = pipes.paramsBuffer(plan);
  const bg = pipes.bindGroup(plan, ops.a, ops.b, ops.c, params);
  const t = await timeGpu(device, ops.c, (pass) => pipes.dispatch(pass, plan, bg), { batches, warmupSeconds });
  const err = await checkSamples(device, ops);
  params.destroy();
  const tol = ops.storage === "f32" ? 1e-5 : 1e-5; // inputs are f16-rounded on the host too, so f32 accumulation error only
  return {
    storage: ops.storage, size: n, tile: tileKey(plan.variant.tile), groupM: plan.variant.groupM, gflops: (2 * n * n * n) / t.seconds / 1e9,
    seconds: t.seconds, method: t.method, maxRelErr: err, ok: err <= tol,
  };
}

function cpuMatmulGflops(n: number): number {
  const a = randomF32(n * n, 1), b = randomF32(n * n, 2), c = new Float32Array(n * n);
  const g = matmulGeometry({ M: n, N: n, K: n });
  matmulF(a, 0, b, 0, c, 0, g); // warm-up
  const times: number[] = [];
  for (let r = 0; r < 3; r++) {
    const t0 = performance.now();
    matmulF(a, 0, b, 0, c, 0, g);
    times.push((performance.now() - t0) / 1000);
  }
  times.sort((x, y) => x - y);
  return (2 * n * n * n) / times[1]! / 1e9;
}

async function elementwiseGBps(device: GPUDevice, n: number, batches: number): Promise<{ gbps: number; method: string }> {
  const x = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const y = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  device.queue.writeBuffer(x, 0, randomF32(Math.min(n, 1 << 20), 5)); // contents do not matter for bandwidth
  const wgs = Math.min(65535, Math.ceil(n / 4 / AFFINE_WORKGROUP));
  const pbuf = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(pbuf, 0, affineParams(n, wgs, 2, 0.5));
  const module = device.createShaderModule({ code: AFFINE_VEC4_WGSL });
  const pipe = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
  const bg = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: x } }, { binding: 1, resource: { buffer: y } }, { binding: 2, resource: { buffer: pbuf } }] });
  const t = await timeGpu(device, y, (pass) => { pass.setPipeline(pipe); pass.setBindGroup(0, bg); pass.dispatchWorkgroups(wgs); }, { batches });
  x.destroy(); y.destroy(); pbuf.destroy();
  return { gbps: (8 * n) / t.seconds / 1e9, method: t.method };
}

interface TorchResult {
  device?: string; torch?: string; error?: string;
  matmul?: { dtype: string; size: number; gflops: number }[];
  elementwise?: { gbps: number } | null;
}

function runTorch(sizes: number[], elementwise: number): TorchResult {
  const script = fileURLToPath(new URL("./torch_matmul.py", import.meta.url));
  if (!existsSync(script)) return { error: `${script} missing` };
  const r = spawnSync("python3", [script, "--sizes", sizes.join(","), "--elementwise", String(elementwise), "--json"], { encoding: "utf8", timeout: 300_000 });
  if (r.error) return { error: `python3: ${r.error.message}` };
  const line = (r.stdout || "").trim().split("\n").pop() || "";
  try {
    return JSON.parse(line) as TorchResult;
  } catch {
    return { error: `torch_matmul.py gave no JSON (exit ${r.status}): ${(r.stderr || "").slice(-300)}` };
  }
}

const fmt = (x: number | undefined, d = 0): string => (x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(d));

/** Entry point used by core/src/cli/bench.ts. */
export async function main(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const opened = await openBenchDevice();
  const { device, info, adapter } = opened;
  const lim = device.limits as unknown as Record<string, number>;
  const limits: MatmulLimits = { maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize!, maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup! };
  const hasF16 = device.features.has("shader-f16");
  console.log(`adapter: ${info.adapter} (${info.adapterType}, ${info.adapterBackend}) via ${opened.source}; vendor ${adapter.info.vendor}`);
  console.log(`features: ${info.features.join(" ")}; workgroup storage ${limits.maxComputeWorkgroupStorageSize} B, ${limits.maxComputeInvocationsPerWorkgroup} invocations`);
  let errors = 0;
  device.addEventListener?.("uncapturederror", (ev) => { errors++; console.error(`GPU error: ${(ev as GPUUncapturedErrorEvent).error.message}`); });

  const torch = args.torch ? runTorch(args.sizes, args.elementwise) : { error: "skipped (--no-torch)" };
  if (torch.error) console.log(`pytorch: ${torch.error}`);
  else console.log(`pytorch: ${torch.torch} on ${torch.device} (fp32 with TF32 off)`);
  const torchG = (dtype: string, n: number) => torch.matmul?.find((r) => r.dtype === dtype && r.size === n)?.gflops;

  const pipes = new MatmulFastPipelines(device);
  const results: MatmulResult[] = [];
  const tuning: MatmulResult[] = [];
  const cpu: { size: number; gflops: number }[] = [];
  const storages: MatmulStorage[] = args.f16 ? ["f32", "f16"] : ["f32"];
  let failed = false;
  console.log(`\nmatmul M=N=K   storage  tile                 GFLOP/s   timing     CPU GFLOP/s  torch GFLOP/s  ratio  max rel err`);
  for (const n of args.sizes) {
    const cpuG = n <= args.cpuMax ? cpuMatmulGflops(n) : undefined;
    if (cpuG !== undefined) cpu.push({ size: n, gflops: cpuG });
    for (const storage of storages) {
      const ops = new Operands(device, n, storage);
      const base: MatmulFastOptions = { limits, f16Native: storage === "f16" && hasF16 };
      const r = await timeMatmul(device, pipes, ops, base, args.batches);
      results.push(r);
      if (!r.ok) failed = true;
      const tg = torchG(storage === "f32" ? "fp32" : "fp16", n);
      console.log(`${String(n).padStart(14)}   ${storage.padEnd(7)}  ${r.tile.padEnd(20)} ${fmt(r.gflops).padStart(8)}   ${r.method.padEnd(9)}  ${fmt(storage === "f32" ? cpuG : undefined, 2).padStart(11)}  ${fmt(tg).padStart(13)}  ${tg ? (r.gflops / tg).toFixed(3) : "  -  "}  ${r.maxRelErr.toExponential(1)}${r.ok ? "" : "  MISMATCH"}`);
      if (args.tune && (args.tuneSizes.length === 0 || args.tuneSizes.includes(n)) && args.tuneStorage.includes(storage)) {
        const variants: MatmulFastOptions[] = [];
        for (const tile of TUNE_TILES[n >= 2048 ? "big" : "small"]) {
          if (!tileFits(tile, limits)) continue;
          for (const scalarOnly of [false, true]) {
            for (const prefetchDistance of [0, 4, tile.BK / 2 === 4 ? 2 : tile.BK / 2]) variants.push({ ...base, tile, scalarOnly, prefetchDistance });
            if (scalarOnly) variants.push({ ...base, tile, scalarOnly, prefetchDistance: 4, unroll2: true });
          }
        }
        if (storage === "f16" && hasF16) variants.push({ ...base, f16Native: false });
        for (const v of variants) {
          const t = { ...(await timeMatmul(device, pipes, ops, v, Math.min(3, args.batches), 0.15)), unroll2: v.unroll2 ?? false, scalar: v.scalarOnly ?? false, prefetchDistance: v.prefetchDistance ?? 0 };
          tuning.push(t);
          if (!t.ok) failed = true;
          console.log(`   tune ${String(n).padStart(5)} ${storage} ${t.tile.padEnd(22)} g${t.groupM} d${v.prefetchDistance ?? 0}${v.unroll2 ? " u2" : "   "}${v.scalarOnly ? " scalar" : "       "} ${v.f16Native ? "native" : "      "} ${fmt(t.gflops).padStart(8)} ${t.maxRelErr.toExponential(1)}${t.ok ? "" : " MISMATCH"}`);
        }
      }
      ops.destroy();
    }
  }
  let ew: { gbps: number; method: string } | undefined;
  if (args.elementwise > 0) {
    ew = await elementwiseGBps(device, args.elementwise - (args.elementwise % 4), args.batches);
    const tg = torch.elementwise?.gbps;
    console.log(`\nelementwise y = a·x + b, n=${args.elementwise}: ${fmt(ew.gbps)} GB/s (${ew.method})  torch y=2x: ${fmt(tg)} GB/s  ratio ${tg ? (ew.gbps / tg).toFixed(3) : "-"}`);
  }
  if (args.json) {
    writeFileSync(args.json, JSON.stringify({ adapter: info, source: opened.source, limits, results, tuning, cpu, elementwise: ew, torch, gpuErrors: errors }, null, 1));
    console.log(`results written to ${args.json}`);
  }
  device.destroy();
  if (failed || errors > 0) throw new Error(`bench kernels: ${failed ? "a matmul result mismatched its float64 reference" : ""} ${errors ? `${errors} GPU errors` : ""}`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(() => process.exit(0), (e) => { console.error(e instanceof Error ? e.message : e); process.exit(1); });
}
