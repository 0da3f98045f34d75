/**
 * The matmuls of the training steps of core/bench/train.ts (mixtral-med, llama-small and
 * mixtral-small's experts; shapes in core/bench/matmul-shapes.json, shared by name with the PyTorch
 * counterpart core/bench/torch_matmul_shapes.py) and 4096³, through the webgpu backend's matmul op.
 *
 *   bun core/bench/matmul-shapes.ts [--shapes a,b,…] [--variants auto,…] [--variants-split …] [--sweep]
 *       [--trusted off|on|both] [--target-ms 40] [--warmup-ms 1500] [--diag] [--json out.json]
 *
 * Timing: GPU timestamps around every dispatch (`profile: true`), summed over a call's dispatches
 * (a split-K call is its chunk matmul plus its reduce), divided by the calls. Before timing, the GPU
 * is kept busy for `--warmup-ms` of wall time (clocks up), and every variant runs a few untimed
 * calls, then enough timed calls for about `--target-ms` of GPU time (at least 5). `--diag` first
 * repeats the measurement of the first version of this bench on 4096³ (one call, then 10 timed
 * calls after the host spent seconds filling buffers, so the GPU idled) beside the warmed
 * measurement, and wall-clock time without the profiler (20 calls between two flushes).
 *
 * Variants (comma-separated; "+" joins settings): `auto` = the backend's defaults (split-K
 * planner on); `nosplit` = split-K off (matmulSplitK false); `t=<tile>` = force a tile (names in
 * TILES; with the planner on it is also the chunks' tile);
 * `sk=<n>` = force n K-chunks (any layout). `--variants` applies to every shape, `--variants-split`
 * in addition to the shapes whose output has fewer than 256 tiles of 128×128 (where splitting K
 * may pay). `--sweep` = split-K off, and every tile alone (split-K off), and for those shapes
 * sk=2,4,8,16 with the 128×128 tiles and the planner's tile.
 * `--trusted on` compiles the matmul kernels without naga's runtime checks (trustedShaders).
 *
 * Each variant is checked once (without accumulate) on sampled outputs of the first rows and the
 * last row against a float64 dot product; the worst relative error (|err| / Σ|a·b|) is printed.
 * Operands repeat a random block in [-1, 1) of prime length (never zeros, never aligned to a row).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createBackend, type MatmulSpec, type MatmulTuning, type View, type WebGpuBackend } from "@zeromoe/kernels";
import { gpuMsPerCall, tiledRandomF32 } from "@zeromoe/kernels/testing";

/** name → [M, N, K, transA, transB, accumulate] (core/bench/matmul-shapes.json). */
const RAW = JSON.parse(readFileSync(new URL("./matmul-shapes.json", import.meta.url), "utf8")) as Record<string, unknown>;

/** The step's matmul shapes by name (the JSON file without its comment). */
export const STEP_MATMULS: Readonly<Record<string, MatmulSpec>> = Object.fromEntries(
  Object.entries(RAW)
    .filter(([k]) => !k.startsWith("_"))
    .map(([k, v]) => {
      const [M, N, K, transA, transB, accumulate] = v as [number, number, number, boolean, boolean, boolean];
      return [k, { M, N, K, transA, transB, accumulate }];
    }),
);

/** Tiles a variant may force, with the schedule the planner gives them (kernels/src/wgsl/matmul-fast-tiles.ts). */
const TILES: Readonly<Record<string, NonNullable<MatmulTuning["tile"]>>> = {
  "128x256x16": { tile: { BM: 128, BN: 256, BK: 16, TM: 8, TN: 16, padA: 0, padB: 0 }, prefetchDistance: 4, unroll2: true },
  "128x128x8": { tile: { BM: 128, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 }, prefetchDistance: 4 },
  "128x128x16": { tile: { BM: 128, BN: 128, BK: 16, TM: 8, TN: 8, padA: 0, padB: 0 }, prefetchDistance: 4 },
  "128x64x8": { tile: { BM: 128, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 } },
  "64x128x8": { tile: { BM: 64, BN: 128, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 } },
  "64x64x8": { tile: { BM: 64, BN: 64, BK: 8, TM: 8, TN: 8, padA: 0, padB: 0 } },
  "64x64x16": { tile: { BM: 64, BN: 64, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 } },
  "64x32x16": { tile: { BM: 64, BN: 32, BK: 16, TM: 4, TN: 4, padA: 0, padB: 0 } },
};

const SWEEP_TILES = ["128x256x16", "128x128x8", "128x128x16", "128x64x8", "64x128x8", "64x64x8", "64x64x16"];
const SWEEP_SPLIT = [2, 4, 8, 16].flatMap((s) => [`sk=${s}`, ...["128x128x8", "128x128x16"].map((t) => `sk=${s}+t=${t}`)]);

interface Variant {
  name: string;
  splitK: boolean;
  tuning: MatmulTuning;
}

function parseVariant(name: string): Variant {
  const v: Variant = { name, splitK: true, tuning: {} };
  for (const part of name.split("+")) {
    if (part === "auto") continue;
    if (part === "nosplit") v.splitK = false;
    else if (part.startsWith("t=")) {
      const t = TILES[part.slice(2)];
      if (!t) throw new Error(`--variants: unknown tile "${part.slice(2)}"; expected one of ${Object.keys(TILES).join(", ")}`);
      v.tuning.tile = t;
    } else if (part.startsWith("sk=")) {
      const n = Number(part.slice(3));
      if (!Number.isInteger(n) || n < 1) throw new Error(`--variants: "${part}" needs a positive integer split count`);
      v.tuning.splitK = n;
    } else throw new Error(`--variants: unknown setting "${part}" (auto, nosplit, t=<tile>, sk=<n>)`);
  }
  return v;
}

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}

/** GPU work recorded right before every timed batch so the clocks are up when it runs (the H200's
 * SM clock falls from 1980 toward 345 MHz within a second of light load, and every timed batch
 * follows a host wait); its kernel (Aᵀ·Bᵀ, a layout no step shape uses) is left out of the sums. */
let heater: (() => void) | null = null;

if (import.meta.main) {
  const names = arg("shapes", Object.keys(STEP_MATMULS).join(",")).split(",");
  for (const n of names) if (!STEP_MATMULS[n]) throw new Error(`--shapes: unknown shape "${n}"; expected some of ${Object.keys(STEP_MATMULS).join(", ")}`);
  const sweep = process.argv.includes("--sweep");
  const all = arg("variants", sweep ? ["auto", "nosplit", ...SWEEP_TILES.map((t) => `nosplit+t=${t}`)].join(",") : "auto").split(",").map(parseVariant);
  const split = arg("variants-split", sweep ? SWEEP_SPLIT.join(",") : "").split(",").filter(Boolean).map(parseVariant);
  const targetMs = Number(arg("target-ms", "40"));
  const warmupMs = Number(arg("warmup-ms", "1500"));
  const trustedArg = arg("trusted", "off");
  const trustedModes = trustedArg === "both" ? [false, true] : [trustedArg === "on"];
  const jsonPath = arg("json", "");
  const results: Record<string, unknown>[] = [];

  let maxA = 0, maxB = 0, maxC = 0;
  for (const n of names) {
    const { M, N, K } = STEP_MATMULS[n]!;
    maxA = Math.max(maxA, M * K); maxB = Math.max(maxB, K * N); maxC = Math.max(maxC, M * N);
  }
  const hostA = tiledRandomF32(maxA, 1), hostB = tiledRandomF32(maxB, 2);

  for (const trusted of trustedModes) {
    const be = (await createBackend("webgpu", { profile: true, ...(trusted ? { trustedShaders: ["mmf_", "matmul_split_k_reduce"] } : {}) })).backend as WebGpuBackend;
    console.log(`adapter ${be.info.adapter}; trusted matmul shaders ${trusted ? "on (no runtime checks)" : "off"}`);
    const put = (data: Float32Array): View => {
      const v = { buf: be.alloc("f32", data.length, "other"), off: 0 };
      be.write(v, data);
      return v;
    };
    const a = put(hostA), b = put(hostB), c = put(tiledRandomF32(maxC, 3));
    const heatDim = Math.floor(Math.sqrt(Math.min(maxA, maxB, maxC)));
    const heat = (): void => {
      const t = { matmulSplitK: false, matmulTuning: {} };
      be.setKernelOptions(t);
      for (let i = 0; i < heatCalls; i++) be.matmul(a, b, c, { M: heatDim, N: heatDim, K: heatDim, transA: true, transB: true });
    };
    // about 15 ms of GPU work at full clocks
    const heatCalls = Math.max(1, Math.min(200, Math.round(15e-3 * 35e12 / (2 * heatDim ** 3))));

    if (process.argv.includes("--diag") && STEP_MATMULS["square_4096"]) {
      const spec = STEP_MATMULS["square_4096"]!;
      const flops = 2 * 4096 ** 3;
      // the first version of this bench: one call, then 10 timed calls, after the GPU idled
      await new Promise((r) => setTimeout(r, 3000));
      be.matmul(a, b, c, spec);
      await be.profile();
      heater = null;
      const cold = await gpuMsPerCall(be, 10, () => be.matmul(a, b, c, spec), heater);
      const t0 = performance.now();
      while (performance.now() - t0 < warmupMs) await gpuMsPerCall(be, 10, () => be.matmul(a, b, c, spec), heater);
      const warm = await gpuMsPerCall(be, 30, () => be.matmul(a, b, c, spec), heater);
      const line = { diag: "square_4096", cold_ms: +cold.ms.toFixed(3), cold_tflops: +(flops / cold.ms / 1e9).toFixed(2), warm_ms: +warm.ms.toFixed(3), warm_tflops: +(flops / warm.ms / 1e9).toFixed(2) };
      // wall clock without the profiler (no pass per dispatch, no timestamp queries)
      const wb = (await createBackend("webgpu", trusted ? { trustedShaders: ["mmf_", "matmul_split_k_reduce"] } : {})).backend as WebGpuBackend;
      const wa = { buf: wb.alloc("f32", 4096 * 4096, "other"), off: 0 }, wbv = { buf: wb.alloc("f32", 4096 * 4096, "other"), off: 0 }, wc = { buf: wb.alloc("f32", 4096 * 4096, "other"), off: 0 };
      wb.write(wa, hostA.subarray(0, 4096 * 4096)); wb.write(wbv, hostB.subarray(0, 4096 * 4096));
      const wall: number[] = [];
      for (let rep = 0; rep < 4; rep++) {
        await wb.flush();
        const s = performance.now();
        for (let i = 0; i < 20; i++) wb.matmul(wa, wbv, wc, spec);
        await wb.flush();
        wall.push((performance.now() - s) / 20);
      }
      wb.destroy();
      console.log(JSON.stringify({ ...line, wall_ms: wall.map((x) => +x.toFixed(3)), wall_tflops_best: +(flops / Math.min(...wall) / 1e9).toFixed(2) }));
      results.push({ ...line, trusted, wall_ms: wall });
    }

    heater = process.argv.includes("--no-heater") ? null : heat;
    heat(); // compiles the heater's pipeline before the clocks are brought up
    // keep the GPU busy so its clocks are up before timing
    const big = names.map((n) => STEP_MATMULS[n]!).sort((x, y) => y.M * y.N * y.K - x.M * x.N * x.K)[0]!;
    const t0 = performance.now();
    while (performance.now() - t0 < warmupMs) await gpuMsPerCall(be, 4, () => be.matmul(a, b, c, big), heater);

    for (const name of names) {
      const spec = STEP_MATMULS[name]!;
      const { M, N, K } = spec;
      const flops = 2 * M * N * K;
      const variants = Math.ceil(M / 128) * Math.ceil(N / 128) < 256 ? [...all, ...split] : all;
      const row: Record<string, number> = {};
      for (const v of variants) {
        const call = (): void => {
          be.setKernelOptions({ matmulSplitK: v.splitK, matmulTuning: v.tuning });
          be.matmul(a, b, c, spec);
        };
        be.setKernelOptions({ matmulSplitK: v.splitK, matmulTuning: v.tuning });
        let out: Record<string, unknown>;
        try {
          // check on sampled outputs (no accumulate)
          be.matmul(a, b, c, { ...spec, accumulate: false });
          const rows = Math.min(M, 8);
          const first = (await be.read(c, rows * N)) as Float32Array;
          const last = (await be.read({ buf: c.buf, off: (M - 1) * N }, N)) as Float32Array;
          let worst = 0;
          for (let sIdx = 0; sIdx < 24; sIdx++) {
            const m = sIdx < 16 ? (sIdx * 7) % rows : M - 1;
            const n = (sIdx * 1031 + 17) % N;
            let s = 0, mag = 0;
            for (let k = 0; k < K; k++) {
              const x = hostA[spec.transA ? k * M + m : m * K + k]! * hostB[spec.transB ? n * K + k : k * N + n]!;
              s += x; mag += Math.abs(x);
            }
            const got = m === M - 1 ? last[n]! : first[m * N + n]!;
            worst = Math.max(worst, Math.abs(got - s) / (mag + 1e-30));
          }
          const probe = await gpuMsPerCall(be, 3, call, heater);
          const calls = Math.max(5, Math.min(500, Math.ceil(targetMs / Math.max(probe.ms, 1e-3))));
          const t = await gpuMsPerCall(be, calls, call, heater);
          out = { name, variant: v.name, trusted, M, N, K, transA: !!spec.transA, transB: !!spec.transB, acc: !!spec.accumulate, calls, ms: +t.ms.toFixed(4), tflops: +(flops / t.ms / 1e9).toFixed(2), max_rel_err: +worst.toExponential(2), kernels: t.kernels };
          row[v.name] = t.ms;
        } catch (e) {
          out = { name, variant: v.name, trusted, error: (e as Error).message.split("\n")[0] };
        }
        console.log(JSON.stringify(out));
        results.push(out);
      }
      const best = Object.entries(row).sort((x, y) => x[1] - y[1])[0];
      if (best) console.log(`# ${name} ${M}x${N}x${K}: auto ${row["auto"]?.toFixed(4) ?? "-"} ms; best ${best[0]} ${best[1].toFixed(4)} ms (${(flops / best[1] / 1e9).toFixed(1)} TFLOP/s)`);
    }
    be.setKernelOptions({ matmulSplitK: true, matmulTuning: {} });
    be.destroy();
  }
  if (jsonPath) writeFileSync(jsonPath, JSON.stringify(results, null, 1) + "\n");
}
