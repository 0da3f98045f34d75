/**
 * Grouped expert matmuls (Backend.groupedMatmulDev, Backend.groupedWeightGrad) at the expert shapes
 * of core/bench/train.ts's MoE models, beside the dense matmul of the same total shape, through the
 * webgpu backend's ops:
 *
 *   bun kernels/bench/grouped-matmul.ts [--models mixtral-med,mixtral-small] [--products fwd_up,…]
 *       [--tiles auto,128x256x16,…] [--target-ms 40] [--rounds 3] [--warmup-ms 1500] [--json out.json]
 *       [--tensor-cores [--coop-tile 128x256x32-4x4-s1]]
 *
 * Per model (R = micro·seq·top-k rows routed to G = 8 experts, hidden H, intermediate I) the six
 * products of one expert FFN layer, as core/src/nn/moe/grouped-linear.ts calls them:
 *   fwd_up   out[R,I] = x[R,H]·W_gᵀ (W_g stored [I,H], transB)        — gate and up projections
 *   fwd_down out[R,H] = h[R,I]·W_gᵀ (W_g stored [H,I], transB)        — down projection
 *   dx_up    dx[R,H] = dy[R,I]·W_g (W_g [I,H] = K×N)                  — gate/up input gradient
 *   dx_down  dx[R,I] = dy[R,H]·W_g (W_g [H,I])                        — down input gradient
 *   dw_up    dW_g[I,H] += dy[rows_g]ᵀ·x[rows_g]                       — gate/up weight gradient
 *   dw_down  dW_g[H,I] += dy[rows_g]ᵀ·h[rows_g]                       — down weight gradient
 * Routing: every token picks top-2 distinct experts from a skewed random distribution (seeded), so
 * group sizes are uneven and not multiples of any tile. The dense comparison: for fwd/dx the matmul
 * with M = R (one weight for all rows); for dw the batched matmul of G equal groups of R/G rows
 * (batch = G, transA) — the same FLOPs with no routing.
 *
 * `--tiles`: the grouped kernels are timed once per entry: `auto` = the planner's tile, a name of
 * TILES = that tile forced (backend matmulTuning) with the planner's schedule for it.
 *
 * Timing: GPU timestamps around every dispatch (`profile: true`), summed over a call's dispatches
 * and divided by the calls, after the GPU was kept busy for `--warmup-ms` (clocks up); each product
 * first runs a probe, then `--rounds` (3) batches of enough calls for about `--target-ms` of GPU
 * time (≥ 5), each after ~15 ms of heater work; the fastest batch is reported. TFLOP/s =
 * 2·R·N·K / time. Every product is checked once on sampled outputs (the first and last row of every
 * group, 8 columns) against a float64 dot product; the worst relative error (|err| / Σ|a·b|) is
 * printed, and a value above 1e-4 makes the run exit 1.
 *
 * `--tensor-cores`: the backend is created with `tensorCores: true` (needs ZEROMOE_WGPU=coop on a
 * GPU with cooperative matrices; exits naming why otherwise), so the grouped products and the dense
 * ones beside them run on the tensor-core kernels (operands scaled and rounded to f16, f32
 * accumulation); the error bound is then 2e-3 (f16's 11 significant bits per operand).
 * `--coop-tile` sets their block (backend option tensorCoreTile; default the backend's).
 */
import { writeFileSync } from "node:fs";
import { createBackend, type MatmulTuning, type View, type WebGpuBackend } from "../src/index.ts";
import { MATMUL_TILE_CHOICES } from "../src/wgsl/matmul-fast-tiles.ts";
import { parseCoopTile } from "../src/wgsl/matmul-coop-tile.ts";
import { gpuMsPerCall, tiledRandomF32, xorshift32 } from "../src/testing.ts";

/** Tiles --tiles may force, by short name (e.g. "128x256x16"), with the planner's schedule. */
const TILES: Readonly<Record<string, NonNullable<MatmulTuning["tile"]>>> = Object.fromEntries(
  MATMUL_TILE_CHOICES.map((c) => [`${c.tile.BM}x${c.tile.BN}x${c.tile.BK}`, { tile: c.tile, prefetchDistance: c.prefetchDistance, unroll2: c.unroll2 }]),
);

/** Expert geometry of a bench model (core/bench/train.ts BENCH_MODELS: micro·seq tokens, top-2 of 8). */
export const GROUPED_BENCH_MODELS: Readonly<Record<string, { tokens: number; H: number; I: number; G: number; topK: number }>> = {
  "mixtral-med": { tokens: 8 * 1024, H: 1024, I: 2816, G: 8, topK: 2 },
  "mixtral-small": { tokens: 16 * 256, H: 512, I: 1024, G: 8, topK: 2 },
};

/** A product: forward/dX (rows) or weight gradient (wgrad); sizes as in the module comment. */
interface Product {
  name: string;
  kind: "rows" | "wgrad";
  /** rows: out[R,N] = x[R,K]·op(W_g); wgrad: dW_g[M,N] = dyᵀ[M,rows]·x[rows,N]. */
  M: number;
  N: number;
  K: number;
  transB: boolean;
  accumulate: boolean;
}

function products(H: number, I: number): Product[] {
  return [
    { name: "fwd_up", kind: "rows", M: 0, N: I, K: H, transB: true, accumulate: false },
    { name: "fwd_down", kind: "rows", M: 0, N: H, K: I, transB: true, accumulate: false },
    { name: "dx_up", kind: "rows", M: 0, N: H, K: I, transB: false, accumulate: true },
    { name: "dx_down", kind: "rows", M: 0, N: I, K: H, transB: false, accumulate: false },
    { name: "dw_up", kind: "wgrad", M: I, N: H, K: 0, transB: false, accumulate: true },
    { name: "dw_down", kind: "wgrad", M: H, N: I, K: 0, transB: false, accumulate: true },
  ];
}

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

/** xorshift32 stream in [0, 1). */
function rng(seed: number): () => number {
  const next = xorshift32(seed);
  return () => next() / 2 ** 32;
}

/** Row offsets (G + 1) of `tokens` tokens each routed to `topK` distinct experts drawn from a
 * skewed distribution (expert weights 1 … 3 at random). */
export function routedOffsets(tokens: number, G: number, topK: number, seed: number): number[] {
  const r = rng(seed);
  const weight = Array.from({ length: G }, () => 1 + 2 * r());
  const total = weight.reduce((a, b) => a + b, 0);
  const counts = new Array<number>(G).fill(0);
  for (let t = 0; t < tokens; t++) {
    const taken = new Set<number>();
    while (taken.size < topK) {
      let u = r() * total, e = 0;
      while (e < G - 1 && u >= weight[e]!) { u -= weight[e]!; e++; }
      taken.add(e);
    }
    for (const e of taken) counts[e]!++;
  }
  const off = [0];
  for (const c of counts) off.push(off[off.length - 1]! + c);
  return off;
}

/** GPU work recorded right before every timed batch so the clocks are up when it runs (every timed
 * batch follows a host wait); its kernel (Aᵀ·Bᵀ, a layout no product here uses) is left out of the
 * sums (see gpuMsPerCall of @zeromoe/kernels/testing, shared with core/bench/matmul-shapes.ts). */
let heater: (() => void) | null = null;

/** Timed batches per measurement; the fastest is reported (clock and scheduling noise only ever
 * slows a batch down). */
let ROUNDS = 3;

async function measure(be: WebGpuBackend, targetMs: number, fn: () => void): Promise<{ ms: number; calls: number; kernels: string[] }> {
  const probe = await gpuMsPerCall(be, 3, fn, heater);
  const calls = Math.max(5, Math.min(500, Math.ceil(targetMs / Math.max(probe.ms, 1e-3))));
  let best = await gpuMsPerCall(be, calls, fn, heater);
  for (let i = 1; i < ROUNDS; i++) {
    const t = await gpuMsPerCall(be, calls, fn, heater);
    if (t.ms < best.ms) best = t;
  }
  return { ...best, calls };
}

if (import.meta.main) {
  const models = arg("models", Object.keys(GROUPED_BENCH_MODELS).join(",")).split(",");
  for (const m of models) {
    if (!GROUPED_BENCH_MODELS[m]) {
      console.error(`--models: unknown model "${m}"; expected some of ${Object.keys(GROUPED_BENCH_MODELS).join(", ")}`);
      process.exit(2);
    }
  }
  const only = arg("products", "").split(",").filter(Boolean);
  const tiles = arg("tiles", "auto").split(",");
  for (const t of tiles) {
    if (t !== "auto" && !TILES[t]) {
      console.error(`--tiles: unknown tile "${t}"; expected auto or some of ${Object.keys(TILES).join(", ")}`);
      process.exit(2);
    }
  }
  /** The grouped call with tile `t` forced (auto: the planner's). */
  const withTile = (t: string, fn: () => void) => () => {
    be.setKernelOptions({ matmulTuning: t === "auto" ? {} : { tile: TILES[t]! } });
    fn();
    be.setKernelOptions({ matmulTuning: {} });
  };
  const targetMs = Number(arg("target-ms", "40"));
  if (!(targetMs > 0)) {
    console.error(`--target-ms must be a positive number of milliseconds, got ${arg("target-ms", "40")}`);
    process.exit(2);
  }
  ROUNDS = Number(arg("rounds", "3"));
  if (!Number.isInteger(ROUNDS) || ROUNDS < 1) {
    console.error(`--rounds must be a positive integer, got ${arg("rounds", "3")}`);
    process.exit(2);
  }
  const warmupMs = Number(arg("warmup-ms", "1500"));
  if (!(warmupMs >= 0)) {
    console.error(`--warmup-ms must be a non-negative number of milliseconds, got ${arg("warmup-ms", "1500")}`);
    process.exit(2);
  }
  const jsonPath = arg("json", "");
  const tensorCores = process.argv.includes("--tensor-cores");
  const coopTile = arg("coop-tile", "");
  const errBound = tensorCores ? 2e-3 : 1e-4;
  let be: WebGpuBackend;
  try {
    be = (await createBackend("webgpu", { profile: true, ...(tensorCores ? { tensorCores: true } : {}), ...(coopTile ? { tensorCoreTile: parseCoopTile(coopTile) } : {}) })).backend as WebGpuBackend;
  } catch (e) {
    console.error(`grouped-matmul bench: ${(e as Error).message}`);
    process.exit(2);
  }
  if (tensorCores) console.log(`tensor cores ${be.tensorCoresStatus}`);
  console.log(`adapter ${be.info.adapter}`);
  const results: Record<string, unknown>[] = [];
  let bad = false;
  for (const model of models) {
    const { tokens, H, I, G, topK } = GROUPED_BENCH_MODELS[model]!;
    const R = tokens * topK;
    const offsets = routedOffsets(tokens, G, topK, 11);
    console.log(`# ${model}: R = ${R} rows, G = ${G}, H = ${H}, I = ${I}, group sizes ${offsets.slice(1).map((o, g) => o - offsets[g]!).join(",")}`);
    const big = R * Math.max(H, I);
    const hostX = tiledRandomF32(big, 1), hostW = tiledRandomF32(G * H * I, 2), hostY = tiledRandomF32(big, 3);
    const put = (data: Float32Array): View => {
      const v = { buf: be.alloc("f32", data.length, "other"), off: 0 };
      be.write(v, data);
      return v;
    };
    const x = put(hostX), w = put(hostW), y = put(hostY);
    const dw = put(new Float32Array(G * H * I));
    const off = { buf: be.alloc("i32", G + 1, "other"), off: 0 };
    be.write(off, Int32Array.from(offsets));
    // about 15 ms of GPU work at full clocks (Aᵀ·Bᵀ on 1024² blocks of x and w, 2.1 GFLOP each)
    // before every timed batch
    heater = () => {
      be.setKernelOptions({ matmulSplitK: false });
      for (let i = 0; i < 250; i++) be.matmul(x, w, y, { M: 1024, N: 1024, K: 1024, transA: true, transB: true });
      be.setKernelOptions({ matmulSplitK: true });
    };
    // clocks up: the biggest dense product for warmupMs
    const t0 = performance.now();
    while (performance.now() - t0 < warmupMs) await gpuMsPerCall(be, 4, () => be.matmul(x, w, y, { M: R, N: I, K: H, transB: true }), heater);

    for (const p of products(H, I)) {
      if (only.length > 0 && !only.includes(p.name)) continue;
      if (p.kind === "rows") {
        const { N, K, transB } = p;
        const flops = 2 * R * N * K;
        const spec = { G, R, N, K, transB, accumulate: p.accumulate };
        // check (no accumulate): first and last row of every non-empty group
        be.groupedMatmulDev(x, w, y, off, { ...spec, accumulate: false });
        let worst = 0;
        for (let g = 0; g < G; g++) {
          const r0 = offsets[g]!, r1 = offsets[g + 1]!;
          if (r1 === r0) continue;
          for (const r of [r0, r1 - 1]) {
            const got = (await be.read({ buf: y.buf, off: r * N }, N)) as Float32Array;
            for (let s = 0; s < 8; s++) {
              const n = (s * 1031 + 17 * g) % N;
              let sum = 0, mag = 0;
              for (let k = 0; k < K; k++) {
                const v = hostX[r * K + k]! * hostW[g * N * K + (transB ? n * K + k : k * N + n)]!;
                sum += v; mag += Math.abs(v);
              }
              worst = Math.max(worst, Math.abs(got[n]! - sum) / (mag + 1e-30));
            }
          }
        }
        const byTile: Record<string, number> = {};
        for (const t of tiles.slice(1)) byTile[t] = +(flops / (await measure(be, targetMs, withTile(t, () => be.groupedMatmulDev(x, w, y, off, spec)))).ms / 1e9).toFixed(2);
        const grouped = await measure(be, targetMs, withTile(tiles[0]!, () => be.groupedMatmulDev(x, w, y, off, spec)));
        const dense = await measure(be, targetMs, () => be.matmul(x, w, y, { M: R, N, K, transB, accumulate: p.accumulate }));
        const row = {
          model, product: p.name, R, N, K, transB, accumulate: p.accumulate, max_rel_err: +worst.toExponential(2),
          grouped_ms: +grouped.ms.toFixed(4), grouped_tflops: +(flops / grouped.ms / 1e9).toFixed(2), grouped_kernels: grouped.kernels, grouped_tflops_by_tile: byTile,
          dense_ms: +dense.ms.toFixed(4), dense_tflops: +(flops / dense.ms / 1e9).toFixed(2), dense_kernels: dense.kernels,
        };
        if (!(worst <= errBound)) bad = true;
        console.log(JSON.stringify(row));
        results.push(row);
      } else {
        const { M, N } = p;
        const flops = 2 * R * M * N;
        const spec = { G, R, M, N, accumulate: p.accumulate };
        // check (no accumulate): 8 entries of every group's dW (y = dy was overwritten by the
        // row products: upload it again)
        be.write(y, hostY);
        be.groupedWeightGrad(y, x, dw, off, { ...spec, accumulate: false });
        const got = (await be.read(dw, G * M * N)) as Float32Array;
        let worst = 0;
        for (let g = 0; g < G; g++) {
          const r0 = offsets[g]!, r1 = offsets[g + 1]!;
          for (let s = 0; s < 8; s++) {
            const i = (s * 577 + 3 * g) % M, j = (s * 1031 + 17 * g) % N;
            let sum = 0, mag = 0;
            for (let r = r0; r < r1; r++) {
              const v = hostY[r * M + i]! * hostX[r * N + j]!;
              sum += v; mag += Math.abs(v);
            }
            worst = Math.max(worst, Math.abs(got[g * M * N + i * N + j]! - sum) / (mag + 1e-30));
          }
        }
        const byTile: Record<string, number> = {};
        for (const t of tiles.slice(1)) byTile[t] = +(flops / (await measure(be, targetMs, withTile(t, () => be.groupedWeightGrad(y, x, dw, off, spec)))).ms / 1e9).toFixed(2);
        const grouped = await measure(be, targetMs, withTile(tiles[0]!, () => be.groupedWeightGrad(y, x, dw, off, spec)));
        const per = Math.floor(R / G);
        const dense = await measure(be, targetMs, () => be.matmul(y, x, dw, { M, N, K: per, batch: G, transA: true, strideA: per * M, strideB: per * N, strideOut: M * N, accumulate: true }));
        const row = {
          model, product: p.name, R, M, N, accumulate: p.accumulate, max_rel_err: +worst.toExponential(2),
          grouped_ms: +grouped.ms.toFixed(4), grouped_tflops: +(flops / grouped.ms / 1e9).toFixed(2), grouped_kernels: grouped.kernels, grouped_tflops_by_tile: byTile,
          dense_batched_ms: +dense.ms.toFixed(4), dense_batched_tflops: +((2 * per * G * M * N) / dense.ms / 1e9).toFixed(2), dense_kernels: dense.kernels,
        };
        if (!(worst <= errBound)) bad = true;
        console.log(JSON.stringify(row));
        results.push(row);
      }
    }
    for (const v of [x, w, y, dw, off]) be.free(v.buf);
  }
  be.destroy();
  if (jsonPath) writeFileSync(jsonPath, JSON.stringify(results, null, 1) + "\n");
  if (bad) {
    console.error(`grouped-matmul bench: a product's sampled check failed (max_rel_err above ${errBound})`);
    process.exit(1);
  }
}
