/**
 * Where a training step leaves the GPU idle: full `Engine.trainBatch` steps (forward, backward,
 * clip, AdamW) of a fixed benchmark model (core/bench/train.ts BENCH_MODELS) on a webgpu backend
 * created with `timeline: true` (kernels/src/webgpu/timeline.ts: every submitted command batch
 * timed on the GPU as a whole, the batches themselves unchanged). Per measured step it prints:
 *
 * - wall ms of trainBatch; GPU busy ms (Σ of the batches' GPU spans: kernels, clears, barriers);
 *   GPU idle ms between the first batch's start and the last one's end (gaps: the GPU had nothing
 *   queued); host ms before the first submit; the rest ("tail": the last batch's end to
 *   trainBatch's return, wake-up latency and host work after the read);
 * - host ms returned by each phase (forward, backward, reduce, optimizer, gather: recording, plus
 *   any host read inside) and the backend's counters for the step (dispatches, submits, host reads
 *   and the ms awaiting them, GPU buffers created / destroyed and the host ms in those calls, bytes
 *   zeroed by clears of reused buffers, bind-group misses, host ms inside submit);
 * - the largest gaps of the last measured step, each with the batches on either side.
 *
 *   bun core/bench/step-gaps.ts [--model mixtral-med] [--steps 3] [--warmup 2]
 *       [--pool-bytes B1,B2…] [--submit-after N1,N2…] [--gaps 8] [--clear-probe MiB]
 *
 * Every pool-bytes × submit-after pair is one configuration (a fresh backend and engine; the
 * defaults of the backend when the flag is absent). `--clear-probe M` then times, as one batch,
 * the clears that zero M MiB of reused pooled buffers (8 buffers; GB/s of `clearBuffer`), which the
 * step pays for every reused buffer (the `alloc` contract: zeros). Exits 2 on bad arguments; needs
 * a WebGPU adapter with `timestamp-query`.
 */
import { createBackend, WebGpuBackend, type BatchTiming, type WebGpuStats } from "@zeromoe/kernels";
import { parseArgs } from "node:util";
import { createSoloCommunicator } from "../src/comm/solo.ts";
import { resolveJobConfig } from "../src/config/resolve.ts";
import { Engine } from "../src/engine/engine.ts";
import { pluginsForJob } from "../src/engine/plugin-loader.ts";
import { microBatch } from "../src/testing/micro-batch.ts";
import { BENCH_MODELS, benchJob } from "./train.ts";

type Phase = "forward" | "backward" | "reduce" | "optimizer" | "gather";

/** One measured step. */
export interface StepGapRow {
  wallMs: number;
  gpuBusyMs: number;
  gpuIdleMs: number;
  hostBeforeFirstSubmitMs: number;
  tailMs: number;
  phaseMs: Record<Phase, number>;
  stats: Omit<WebGpuStats, "pooledBytes" | "pipelines" | "maxLiveBytes">;
  pooledBytes: number;
  maxLiveBytes: number;
  batches: BatchTiming[];
  stepStartMs: number;
}

/** The gaps of one step's batches: GPU idle between consecutive batches, with context. */
export function stepGaps(batches: readonly BatchTiming[]): { ms: number; before: BatchTiming; after: BatchTiming; hostMs: number }[] {
  const out: { ms: number; before: BatchTiming; after: BatchTiming; hostMs: number }[] = [];
  for (let i = 1; i < batches.length; i++) {
    const a = batches[i - 1]!;
    const b = batches[i]!;
    if (!Number.isFinite(a.gpuEndNs) || !Number.isFinite(b.gpuBeginNs)) continue;
    out.push({ ms: Math.max(0, b.gpuBeginNs - a.gpuEndNs) / 1e6, before: a, after: b, hostMs: b.hostSubmitMs - a.hostSubmitMs });
  }
  return out;
}

const STAT_KEYS = ["dispatches", "submits", "bindGroupHits", "bindGroupMisses", "reads", "waits", "waitMs", "buffersCreated", "buffersReused", "createMs", "buffersDestroyed", "destroyMs", "clearedBytes", "submitMs"] as const;

/** Run `warmup + steps` steps of `model` on a fresh timeline backend and return the measured ones. */
export async function measureStepGaps(model: string, steps: number, warmup: number, backendOpts: { bufferPoolBytes?: number; submitAfter?: number }): Promise<{ adapter: string; params: number; rows: StepGapRow[] }> {
  const job = benchJob(model, "webgpu", "fp32", { models: [model], backends: ["webgpu"], steps, warmup });
  const { config } = resolveJobConfig(job, { source: `step-gaps ${model}` });
  const { backend } = await createBackend("webgpu", { timeline: true, ...backendOpts });
  if (!(backend instanceof WebGpuBackend)) throw new Error("step-gaps: needs the webgpu backend");
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend, plugins: await pluginsForJob(config), log: () => {} });
  const phaseMs: Record<Phase, number> = { forward: 0, backward: 0, reduce: 0, optimizer: 0, gather: 0 };
  engine.phaseObserver = {
    time<T>(phase: Phase, fn: () => T): T {
      const t0 = performance.now();
      const r = fn();
      if (r instanceof Promise) return r.finally(() => (phaseMs[phase] += performance.now() - t0)) as T;
      phaseMs[phase] += performance.now() - t0;
      return r;
    },
  };
  const micro = config.train_micro_batch_size_per_gpu;
  const seq = config.data.seq_len;
  const rows: StepGapRow[] = [];
  for (let s = 0; s < warmup + steps; s++) {
    await backend.flush();
    backend.resetTimeline();
    for (const k of Object.keys(phaseMs) as Phase[]) phaseMs[k] = 0;
    const before = backend.stats();
    const t0 = performance.now();
    await engine.trainBatch([microBatch(s, 0, micro, seq, config.model.vocab_size)]);
    const wall = performance.now() - t0;
    const after = backend.stats();
    const batches = await backend.timeline();
    if (s < warmup) continue;
    const timed = batches.filter((b) => Number.isFinite(b.gpuBeginNs));
    const busy = timed.reduce((a, b) => a + (b.gpuEndNs - b.gpuBeginNs), 0) / 1e6;
    const span = timed.length > 0 ? (timed[timed.length - 1]!.gpuEndNs - timed[0]!.gpuBeginNs) / 1e6 : 0;
    const first = batches[0]?.hostSubmitMs ?? t0;
    const stats = {} as StepGapRow["stats"];
    for (const k of STAT_KEYS) (stats as Record<string, number>)[k] = after[k] - before[k];
    rows.push({ wallMs: wall, gpuBusyMs: busy, gpuIdleMs: span - busy, hostBeforeFirstSubmitMs: first - t0, tailMs: wall - (first - t0) - span, phaseMs: { ...phaseMs }, stats, pooledBytes: after.pooledBytes, maxLiveBytes: after.maxLiveBytes, batches, stepStartMs: t0 });
  }
  const params = engine.model.numParameters;
  engine.destroy();
  const adapter = backend.info.adapter;
  backend.destroy();
  return { adapter, params, rows };
}

const USAGE = "usage: bun core/bench/step-gaps.ts [--model mixtral-med] [--steps 3] [--warmup 2] [--pool-bytes B1,B2…] [--submit-after N1,N2…] [--gaps 8] [--clear-probe MiB]";

/** GPU ms of the clears zeroing `mib` MiB of reused buffers (8 equal buffers), as one batch. */
export async function clearProbe(mib: number): Promise<{ ms: number; bytes: number }> {
  const { backend } = await createBackend("webgpu", { timeline: true });
  if (!(backend instanceof WebGpuBackend)) throw new Error("step-gaps: needs the webgpu backend");
  const n = Math.max(1, Math.floor((mib * 2 ** 20) / 8 / 4));
  const first = Array.from({ length: 8 }, () => backend.alloc("f32", n, "other"));
  for (const b of first) backend.fill({ buf: b, off: 0 }, 1, n); // touched, so the driver has them
  await backend.flush();
  for (const b of first) backend.free(b);
  const again = Array.from({ length: 8 }, () => backend.alloc("f32", n, "other")); // reused: cleared
  backend.resetTimeline();
  await backend.flush();
  const t = (await backend.timeline()).filter((b) => b.clearBytes > 0);
  for (const b of again) backend.free(b);
  backend.destroy();
  const ms = t.reduce((a, b) => a + (b.gpuEndNs - b.gpuBeginNs), 0) / 1e6;
  return { ms, bytes: t.reduce((a, b) => a + b.clearBytes, 0) };
}

function ints(flag: string, raw: string | undefined, min: number): (number | undefined)[] {
  if (raw === undefined) return [undefined];
  return raw.split(",").map((x) => {
    const v = Number(x);
    if (!Number.isInteger(v) || v < min) throw new Error(`--${flag}: expected integers ≥ ${min}, got "${x}"\n${USAGE}`);
    return v;
  });
}

const f1 = (x: number): string => x.toFixed(1);

/** CLI entry (see the module comment). */
export async function main(args: string[]): Promise<void> {
  let model: string, steps: number, warmup: number, gaps: number, pools: (number | undefined)[], submitAfters: (number | undefined)[], probe: number | undefined;
  try {
    const { values } = parseArgs({ args, strict: true, options: { model: { type: "string", default: "mixtral-med" }, steps: { type: "string", default: "3" }, warmup: { type: "string", default: "2" }, "pool-bytes": { type: "string" }, "submit-after": { type: "string" }, gaps: { type: "string", default: "8" }, "clear-probe": { type: "string" } } });
    model = values.model!;
    if (!BENCH_MODELS[model]) throw new Error(`--model: unknown "${model}"; known: ${Object.keys(BENCH_MODELS).join(", ")}\n${USAGE}`);
    steps = ints("steps", values.steps, 1)[0]!;
    warmup = ints("warmup", values.warmup, 0)[0]!;
    gaps = ints("gaps", values.gaps, 0)[0]!;
    pools = ints("pool-bytes", values["pool-bytes"], 0);
    submitAfters = ints("submit-after", values["submit-after"], 1);
    probe = ints("clear-probe", values["clear-probe"], 1)[0];
  } catch (e) {
    console.error(`step-gaps: ${(e as Error).message}`);
    process.exit(2);
  }
  for (const pool of pools) {
    for (const sa of submitAfters) {
      const opts = { ...(pool !== undefined ? { bufferPoolBytes: pool } : {}), ...(sa !== undefined ? { submitAfter: sa } : {}) };
      const { adapter, params, rows } = await measureStepGaps(model, steps, warmup, opts);
      console.log(`\n### ${model} (${params.toLocaleString("en-US")} parameters) on ${adapter}; backend options ${JSON.stringify(opts)}; ${warmup} warm-up + ${steps} measured steps`);
      console.log("| step | wall ms | GPU busy | GPU idle (gaps) | host before 1st submit | tail | fwd / bwd / reduce / optim / gather host ms | dispatches | submits | reads (wait ms) | buffers created (ms) | destroyed (ms) | cleared MB | bind-group misses | submit ms | pooled MB | max live MB |");
      console.log("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |");
      rows.forEach((r, i) => {
        const p = r.phaseMs;
        const s = r.stats;
        console.log(`| ${i + 1} | ${f1(r.wallMs)} | ${f1(r.gpuBusyMs)} | ${f1(r.gpuIdleMs)} | ${f1(r.hostBeforeFirstSubmitMs)} | ${f1(r.tailMs)} | ${[p.forward, p.backward, p.reduce, p.optimizer, p.gather].map(f1).join(" / ")} | ${s.dispatches} | ${s.submits} | ${s.reads} (${f1(s.waitMs)}) | ${s.buffersCreated} (${f1(s.createMs)}) | ${s.buffersDestroyed} (${f1(s.destroyMs)}) | ${f1(s.clearedBytes / 2 ** 20)} | ${s.bindGroupMisses} | ${f1(s.submitMs)} | ${f1(r.pooledBytes / 2 ** 20)} | ${f1(r.maxLiveBytes / 2 ** 20)} |`);
      });
      const last = rows[rows.length - 1]!;
      const g = stepGaps(last.batches).sort((a, b) => b.ms - a.ms).slice(0, gaps);
      if (g.length > 0) {
        console.log(`\nlargest gaps of the last step (host ms since step start at the next submit; host ms between the two submits):`);
        for (const x of g) console.log(`- ${x.ms.toFixed(2)} ms idle at host +${f1(x.after.hostSubmitMs - last.stepStartMs)} ms: after [${x.before.firstLabel}…${x.before.lastLabel}] (${x.before.dispatches} dispatches, ${x.before.reason}) before [${x.after.firstLabel}…${x.after.lastLabel}] (${x.after.dispatches}, ${x.after.reason}, ${f1(x.after.clearBytes / 2 ** 20)} MB cleared); host ${f1(x.hostMs)} ms between submits`);
      }
    }
  }
  if (probe !== undefined) {
    const c = await clearProbe(probe);
    console.log(`\nclear probe: ${(c.bytes / 2 ** 20).toFixed(0)} MiB of reused buffers zeroed in ${c.ms.toFixed(2)} GPU ms (${(c.bytes / 1e9 / (c.ms / 1e3)).toFixed(0)} GB/s)`);
  }
}

if (import.meta.main) await main(process.argv.slice(2));
