/**
 * The tensor-core GEMM table: 4096³ and the matmuls of real models' layers (forward, dX, dW), dense
 * and grouped, through the webgpu backend's ops with `tensorCores: true`, one backend per kernel
 * variant, beside cuBLAS bf16/fp16 (kernels/bench/torch_gemm_real_shapes.py, run by this command
 * with --torch):
 *
 *   bun kernels/bench/gemm-real-shapes.ts [--variants regs8,coop,none,regs4,f32,regs8+direct@128x256x16-4x4-s2] [--models llama3-8b,mixtral-8x7b,qwen3-30b-a3b]
 *       [--products q_fwd,…] [--tile 128x256x32-4x4-s1] [--split-k N] [--target-ms 20] [--warmup-ms 3000]
 *       [--torch] [--json out.json] [--emulated --shrink 64]
 *
 * Variants (backend option tensorCoreVariant): regs8 / regs4 = packed f16 operands, "regs" staging
 * with 16- / 8-byte loads; regs8m = regs8 with the 16-byte loads typed mat2x4<f16> (no f16↔f32
 * conversion per staged half); coop = packed, fragments loaded from memory and coopStore'd into
 * workgroup memory; none = packed, fragments straight from memory (no workgroup memory); f32 = the
 * older kernel reading f32 operands with scalar loads and rounding them in registers. Each may take
 * `+direct` (direct epilogue where M, N are multiples of 16) and `@TILE` (a forced block), e.g.
 * `regs8+direct@128x256x16-4x4-s2` ({@link parseGemmVariant}). `--tile` forces one block for every
 * variant without its own (tensorCoreTile) instead of the per-problem rule, `--split-k` a chunk count.
 *
 * Models (tokens = 8192 per step, as 4 × 2048):
 * - llama3-8b: hidden 4096, intermediate 14336, 32 heads / 8 kv heads of 128 (q/o 4096, k/v 1024)
 * - mixtral-8x7b experts: 8 experts top-2 (R = 16384 rows), hidden 4096, intermediate 14336
 * - qwen3-30b-a3b experts: 128 experts top-8 (R = 65536 rows, ~512 per expert), hidden 2048,
 *   moe_intermediate 768
 * Dense products: out[M,N] = op(A)·op(B) in the layouts the engine runs (forward x·Wᵀ "NT", dX
 * dy·W "NN", dW dyᵀ·x "TN" accumulated). Grouped: groupedMatmulDev (forward transB, dX) and
 * groupedWeightGrad (dW accumulated) with routed, uneven group sizes (kernels/bench/grouped-matmul.ts
 * routedOffsets).
 *
 * Timing: GPU timestamps of every dispatch of a call (profile mode; the max-abs, pack, kernel and
 * split-K reduce dispatches all count), summed and divided by the calls; after `--warmup-ms` of
 * sustained work (the H200 idles at 345 MHz), each product runs a probe, then 2 batches of ~`--target-ms`;
 * the faster is kept. TFLOP/s = 2·M·N·K / time. Error: 48 sampled outputs per product against a
 * float64 dot product of the f32 inputs, |out − ref| / Σ|a·b| (bound 2e-3: f16's 11 bits per
 * operand); the run exits 1 above it. One compact table at the end (TFLOP/s per variant, max error,
 * cuBLAS bf16 and fp16 when --torch). `--emulated --shrink S` runs the same table with emulated
 * cooperative matrices (tensorCores "emulated") and every size divided by S (tokens too): a check
 * of the command itself on a machine without tensor cores, not a measurement.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createBackend, type View, type WebGpuBackend } from "../src/index.ts";
import { gpuMsPerCall, tiledRandomF32 } from "../src/testing.ts";
import type { TensorCoreVariant } from "../src/webgpu/tensor-cores.ts";
import { parseCoopTile, type CoopTile } from "../src/wgsl/matmul-coop-tile.ts";
import { routedOffsets } from "./grouped-matmul.ts";

/** One product of the table. dense: out[M,N] = op(A)·op(B); rows: grouped forward/dX over R rows
 * (M unused); wgrad: grouped dW_g[M,N] over the groups' rows. */
export interface GemmProduct {
  model: string;
  name: string;
  kind: "dense" | "rows" | "wgrad";
  M: number;
  N: number;
  K: number;
  transA?: boolean;
  transB?: boolean;
  accumulate?: boolean;
  /** grouped: experts, rows (tokens · top-k), top-k */
  G?: number;
  R?: number;
  topK?: number;
}

/** Tokens per step (4 × 2048). */
const TOKENS = 8192;

/** Every product of the table, by model (shared with torch_gemm_real_shapes.py by name and shape). */
export function gemmProducts(shrink = 1): GemmProduct[] {
  const z = (n: number) => Math.max(1, Math.round(n / shrink));
  const T = z(TOKENS);
  const d = (model: string, name: string, M: number, N: number, K: number, transA = false, transB = false, accumulate = false): GemmProduct => ({ model, name, kind: "dense", M: z(M), N: z(N), K: z(K), transA, transB, accumulate });
  const H = 4096, I = 14336, KV = 1024, T0 = TOKENS;
  const out: GemmProduct[] = [
    d("square", "square_4096", 4096, 4096, 4096),
    d("llama3-8b", "q_o_fwd", T0, H, H, false, true),
    d("llama3-8b", "kv_fwd", T0, KV, H, false, true),
    d("llama3-8b", "gate_up_fwd", T0, I, H, false, true),
    d("llama3-8b", "down_fwd", T0, H, I, false, true),
    d("llama3-8b", "q_o_dX", T0, H, H),
    d("llama3-8b", "kv_dX", T0, H, KV),
    d("llama3-8b", "gate_up_dX", T0, H, I),
    d("llama3-8b", "down_dX", T0, I, H),
    d("llama3-8b", "q_o_dW", H, H, T0, true, false, true),
    d("llama3-8b", "kv_dW", KV, H, T0, true, false, true),
    d("llama3-8b", "gate_up_dW", I, H, T0, true, false, true),
    d("llama3-8b", "down_dW", H, I, T0, true, false, true),
  ];
  const experts = (model: string, G: number, topK: number, Hm0: number, Im0: number) => {
    const R = T * topK, Hm = z(Hm0), Im = z(Im0);
    out.push(
      { model, name: "fwd_up", kind: "rows", M: 0, N: Im, K: Hm, transB: true, G, R, topK },
      { model, name: "fwd_down", kind: "rows", M: 0, N: Hm, K: Im, transB: true, G, R, topK },
      { model, name: "dx_up", kind: "rows", M: 0, N: Hm, K: Im, accumulate: true, G, R, topK },
      { model, name: "dx_down", kind: "rows", M: 0, N: Im, K: Hm, G, R, topK },
      { model, name: "dw_up", kind: "wgrad", M: Im, N: Hm, K: 0, accumulate: true, G, R, topK },
      { model, name: "dw_down", kind: "wgrad", M: Hm, N: Im, K: 0, accumulate: true, G, R, topK },
    );
  };
  experts("mixtral-8x7b", 8, 2, 4096, 14336);
  experts("qwen3-30b-a3b", 128, 8, 2048, 768);
  return out;
}

/** FLOPs of a product (grouped: 2·R·N·K for rows, 2·R·M·N for wgrad). */
export function gemmFlops(p: GemmProduct): number {
  if (p.kind === "dense") return 2 * p.M * p.N * p.K;
  return p.kind === "rows" ? 2 * p.R! * p.N * p.K : 2 * p.R! * p.M * p.N;
}

const VARIANTS: Readonly<Record<string, TensorCoreVariant>> = {
  regs8: { operands: "packed", staging: "regs", vec: 8 },
  regs8m: { operands: "packed", staging: "regs", vec: 8, vec8Type: "mat2x4" },
  regs4: { operands: "packed", staging: "regs", vec: 4 },
  coop: { operands: "packed", staging: "coop" },
  none: { operands: "packed", staging: "none" },
  f32: { operands: "f32" },
};

/**
 * One `--variants` entry: `BASE[+direct][@TILE]` — BASE a key of the variant table (regs8, regs4,
 * coop, none, f32), `+direct` the direct epilogue where the output allows it (tensorCoreVariant
 * epilogue "auto"), `@TILE` a forced block (tensorCoreTile, e.g. 128x256x16-4x4-s2) instead of the
 * per-problem rule. E.g. `regs8+direct@128x256x16-4x4-s2`.
 * @throws Error naming the entry and what was expected.
 */
export function parseGemmVariant(spec: string): { v: TensorCoreVariant; tile?: CoopTile } {
  const m = /^([a-z0-9]+)(\+direct)?(?:@(.+))?$/.exec(spec);
  const base = m ? VARIANTS[m[1]!] : undefined;
  if (!m || !base) throw new Error(`unknown variant "${spec}"; expected BASE[+direct][@TILE] with BASE one of ${Object.keys(VARIANTS).join(", ")}`);
  if (m[2] && base.operands === "f32") throw new Error(`variant "${spec}": +direct applies to packed operands only`);
  const v: TensorCoreVariant = { ...base, ...(m[2] ? { epilogue: "auto" as const } : {}) };
  return m[3] ? { v, tile: parseCoopTile(m[3]) } : { v };
}

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

function fail(msg: string): never {
  console.error(`gemm-real-shapes: ${msg}`);
  process.exit(2);
}

if (import.meta.main) {
  const variants = arg("variants", "regs8,coop,none").split(",");
  const parsed = new Map<string, { v: TensorCoreVariant; tile?: CoopTile }>();
  for (const v of variants) {
    try {
      parsed.set(v, parseGemmVariant(v));
    } catch (e) {
      fail(`--variants: ${(e as Error).message}`);
    }
  }
  const models = arg("models", "square,llama3-8b,mixtral-8x7b,qwen3-30b-a3b").split(",");
  const shrink = Number(arg("shrink", "1"));
  if (!(Number.isInteger(shrink) && shrink >= 1)) fail(`--shrink must be a positive integer, got ${arg("shrink", "1")}`);
  const emulated = process.argv.includes("--emulated");
  const all = gemmProducts(shrink);
  for (const m of models) if (!all.some((p) => p.model === m)) fail(`--models: unknown model "${m}"; expected some of ${[...new Set(all.map((p) => p.model))].join(", ")}`);
  const only = arg("products", "").split(",").filter(Boolean);
  const list = all.filter((p) => models.includes(p.model) && (only.length === 0 || only.includes(p.name)));
  const tileName = arg("tile", "");
  let tile;
  try {
    tile = tileName ? parseCoopTile(tileName) : undefined;
  } catch (e) {
    fail(`--tile: ${(e as Error).message}`);
  }
  const splitK = arg("split-k", "") ? Number(arg("split-k", "")) : undefined;
  if (splitK !== undefined && !(Number.isInteger(splitK) && splitK >= 1)) fail(`--split-k must be a positive integer, got ${arg("split-k", "")}`);
  const targetMs = Number(arg("target-ms", "20"));
  if (!(targetMs > 0)) fail(`--target-ms must be a positive number, got ${arg("target-ms", "20")}`);
  const warmupMs = Number(arg("warmup-ms", "3000"));
  if (!(warmupMs >= 0)) fail(`--warmup-ms must be ≥ 0, got ${arg("warmup-ms", "3000")}`);
  const jsonPath = arg("json", "");

  // host operands: one f32 pool per role, large enough for every product (tiled random in [-1, 1))
  const need = { a: 0, b: 0, out: 0 };
  for (const p of list) {
    if (p.kind === "dense") {
      need.a = Math.max(need.a, p.M * p.K); need.b = Math.max(need.b, p.K * p.N); need.out = Math.max(need.out, p.M * p.N);
    } else if (p.kind === "rows") {
      need.a = Math.max(need.a, p.R! * p.K); need.b = Math.max(need.b, p.G! * p.N * p.K); need.out = Math.max(need.out, p.R! * p.N);
    } else {
      need.a = Math.max(need.a, p.R! * p.M); need.b = Math.max(need.b, p.R! * p.N); need.out = Math.max(need.out, p.G! * p.M * p.N);
    }
  }
  const w = Math.max(16, Math.round(4096 / shrink)); // the warm-up product: w × w × w/2
  need.a = Math.max(need.a, (w * w) / 2); need.b = Math.max(need.b, (w * w) / 2); need.out = Math.max(need.out, w * w);
  const hostA = tiledRandomF32(need.a, 1), hostB = tiledRandomF32(need.b, 2);
  const rows: Record<string, unknown>[] = list.map((p) => ({ model: p.model, product: p.name, kind: p.kind, shape: p.kind === "dense" ? `${p.M}x${p.N}x${p.K} ${p.transA ? "T" : "N"}${p.transB ? "T" : "N"}${p.accumulate ? "+" : ""}` : p.kind === "rows" ? `R${p.R} G${p.G} N${p.N} K${p.K}${p.transB ? " T" : ""}${p.accumulate ? "+" : ""}` : `R${p.R} G${p.G} ${p.M}x${p.N}+` }));
  let bad = false;
  for (const vname of variants) {
    let be: WebGpuBackend;
    try {
      const pv = parsed.get(vname)!;
      const vTile = pv.tile ?? tile;
      be = (await createBackend("webgpu", { profile: true, tensorCores: emulated ? "emulated" : true, tensorCoreVariant: { ...pv.v, ...(splitK && pv.v.operands !== "f32" ? { splitK } : {}) }, ...(vTile ? { tensorCoreTile: vTile } : {}), tensorCoreMinBlocks: 0 })).backend as WebGpuBackend;
    } catch (e) {
      fail((e as Error).message);
    }
    console.log(`# variant ${vname}: tensor cores ${be.tensorCoresStatus}; adapter ${be.info.adapter}`);
    const put = (data: Float32Array | Int32Array, dtype: "f32" | "i32" = "f32"): View => {
      const v = { buf: be.alloc(dtype, data.length, "other"), off: 0 };
      be.write(v, data);
      return v;
    };
    const A = put(hostA), B = put(hostB), O = { buf: be.alloc("f32", need.out, "other"), off: 0 };
    const warm = () => be.matmul(A, B, O, { M: w, N: w, K: w / 2, transB: true });
    const t0 = performance.now();
    while (performance.now() - t0 < warmupMs) await gpuMsPerCall(be, 8, warm);
    for (const [pi, p] of list.entries()) {
      try {
        let fn: () => void;
        let offsets: number[] = [];
        let off: View | null = null;
        if (p.kind === "dense") {
          fn = () => be.matmul(A, B, O, { M: p.M, N: p.N, K: p.K, transA: p.transA, transB: p.transB, accumulate: p.accumulate });
        } else {
          offsets = routedOffsets(p.R! / p.topK!, p.G!, p.topK!, 11);
          off = put(Int32Array.from(offsets), "i32");
          fn = p.kind === "rows"
            ? () => be.groupedMatmulDev(A, B, O, off!, { G: p.G!, R: p.R!, N: p.N, K: p.K, transB: !!p.transB, accumulate: !!p.accumulate })
            : () => be.groupedWeightGrad(A, B, O, off!, { G: p.G!, R: p.R!, M: p.M, N: p.N, accumulate: !!p.accumulate });
        }
        const probe = await gpuMsPerCall(be, 2, fn);
        const calls = Math.max(3, Math.min(200, Math.ceil(targetMs / Math.max(probe.ms, 1e-3))));
        let best = await gpuMsPerCall(be, calls, fn);
        const again = await gpuMsPerCall(be, calls, fn);
        if (again.ms < best.ms) best = again;
        // check: one call without accumulation, 48 sampled outputs against float64 of the f32 inputs
        let worst = 0;
        if (p.kind === "dense") {
          be.matmul(A, B, O, { M: p.M, N: p.N, K: p.K, transA: p.transA, transB: p.transB });
          for (let s = 0; s < 48; s++) {
            const m = (s * 2654435761) % p.M, n = (s * 40503 + 7) % p.N;
            const got = (await be.read({ buf: O.buf, off: m * p.N + n }, 1)) as Float32Array;
            let sum = 0, mag = 0;
            for (let k = 0; k < p.K; k++) {
              const v = hostA[p.transA ? k * p.M + m : m * p.K + k]! * hostB[p.transB ? n * p.K + k : k * p.N + n]!;
              sum += v; mag += Math.abs(v);
            }
            worst = Math.max(worst, Math.abs(got[0]! - sum) / (mag + 1e-30));
          }
        } else if (p.kind === "rows") {
          be.groupedMatmulDev(A, B, O, off!, { G: p.G!, R: p.R!, N: p.N, K: p.K, transB: !!p.transB, accumulate: false });
          for (let s = 0; s < 48; s++) {
            const g = (s * 37) % p.G!, r0 = offsets[g]!, r1 = offsets[g + 1]!;
            if (r1 === r0) continue;
            const r = r0 + ((s * 7919) % (r1 - r0)), n = (s * 40503 + 7) % p.N;
            const got = (await be.read({ buf: O.buf, off: r * p.N + n }, 1)) as Float32Array;
            let sum = 0, mag = 0;
            for (let k = 0; k < p.K; k++) {
              const v = hostA[r * p.K + k]! * hostB[g * p.N * p.K + (p.transB ? n * p.K + k : k * p.N + n)]!;
              sum += v; mag += Math.abs(v);
            }
            worst = Math.max(worst, Math.abs(got[0]! - sum) / (mag + 1e-30));
          }
        } else {
          be.groupedWeightGrad(A, B, O, off!, { G: p.G!, R: p.R!, M: p.M, N: p.N, accumulate: false });
          for (let s = 0; s < 48; s++) {
            const g = (s * 37) % p.G!, i = (s * 2654435761) % p.M, j = (s * 40503 + 7) % p.N;
            const got = (await be.read({ buf: O.buf, off: g * p.M * p.N + i * p.N + j }, 1)) as Float32Array;
            let sum = 0, mag = 0;
            for (let r = offsets[g]!; r < offsets[g + 1]!; r++) {
              const v = hostA[r * p.M + i]! * hostB[r * p.N + j]!;
              sum += v; mag += Math.abs(v);
            }
            worst = Math.max(worst, Math.abs(got[0]! - sum) / (mag + 1e-30));
          }
        }
        if (off) be.free(off.buf);
        if (!(worst <= 2e-3)) bad = true;
        const row = rows[pi]!;
        row[vname] = +(gemmFlops(p) / best.ms / 1e9).toPrecision(4);
        row[`${vname}_err`] = +worst.toExponential(1);
        row[`${vname}_kernels`] = best.kernels.join(" ");
        console.log(JSON.stringify({ variant: vname, ...row }));
      } catch (e) {
        // a variant the driver refuses (or a failed product) is reported, and the variant stops
        bad = true;
        const msg = (e as Error).message.split("\n").slice(0, 6).join(" | ");
        rows[pi]![vname] = "ERROR";
        console.log(`# variant ${vname}, ${p.model}/${p.name}: ERROR ${msg}`);
        break;
      }
    }
    try {
      be.destroy();
    } catch {
      // already lost
    }
  }
  if (process.argv.includes("--torch")) {
    const names = list.map((p) => `${p.model}/${p.name}`).join(",");
    const r = spawnSync("python3", [new URL("./torch_gemm_real_shapes.py", import.meta.url).pathname, "--products", names], { encoding: "utf8", maxBuffer: 1 << 26 });
    if (r.status !== 0) console.log(`# torch: exit ${r.status}: ${(r.stderr || r.stdout).trim().split("\n").slice(-3).join(" | ")}`);
    for (const line of (r.stdout ?? "").split("\n")) {
      if (!line.startsWith("{")) continue;
      const t = JSON.parse(line) as Record<string, unknown>;
      if (t.device) console.log(`# torch ${t.torch} on ${t.device}`);
      const row = rows.find((x) => `${x.model}/${x.product}` === t.product);
      if (row) for (const k of ["bf16", "fp16", "bf16_grouped_mm"]) if (t[k] !== undefined) row[`torch_${k}`] = t[k];
    }
  }
  // the compact table
  const cols = [...variants.flatMap((v) => [v, `${v}_err`]), "torch_bf16", "torch_fp16", "torch_bf16_grouped_mm"];
  console.log(`\n| model | product | shape | ${cols.join(" | ")} |`);
  console.log(`|${" --- |".repeat(3 + cols.length)}`);
  for (const r of rows) console.log(`| ${r.model} | ${r.product} | ${r.shape} | ${cols.map((c) => (r[c] === undefined ? "" : String(r[c]))).join(" | ")} |`);
  if (jsonPath) writeFileSync(jsonPath, JSON.stringify(rows, null, 1) + "\n");
  if (bad) {
    console.error("gemm-real-shapes: a product's sampled error exceeded 2e-3");
    process.exit(1);
  }
}
