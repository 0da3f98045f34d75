/**
 * Host overhead per dispatch of a training step on the webgpu backend: full `Engine.trainBatch`
 * steps (forward, backward, reduce, clip, AdamW) of a model at a tiny batch. Reports per step: wall
 * ms, dispatches, µs of wall time per dispatch, host reads (each a wait for the device), queue-idle
 * waits, submits, GPU buffers created and reused, bind-group cache misses (`WebGpuBackend.stats()`),
 * and the main thread's CPU time (Linux schedstat) split three ways: recording (JavaScript, op
 * planning, encoding through the FFI — µs per dispatch), inside `queue.submit` (wgpu's submission
 * work; on lavapipe also the driver executing the batch, which it does inside submit) and inside
 * host reads (their submit, then the event pump polling while the device works). The recording
 * figure is the host overhead proper: it does not depend on how fast the device is.
 *
 *   bun run bench host-overhead [--model llama-small|default] [--micro 1] [--seq 8] [--steps 10]
 *       [--warmup 2] [--stage 0] [--clip 1.0] [--precision fp32|bf16] [--max-batch N] [--pool-bytes B] [--submit-after N] [--hidden H] [--json out.json]
 *
 * `llama-small` is the layer structure of the train bench's llama-small (hidden 512, 8 layers,
 * 8 heads, vocab 256); `default` the built-in job's MoE model. The first `warmup` steps compile
 * pipelines and grow pools and are not measured. Exits 2 on bad arguments.
 */
import { WebGpuBackend, createBackend, type WebGpuStats } from "@zeromoe/kernels";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { createSoloCommunicator } from "../src/comm/solo.ts";
import { DEFAULT_JOB } from "../src/config/default-job.ts";
import { resolveJobConfig } from "../src/config/resolve.ts";
import { Engine } from "../src/engine/engine.ts";
import { pluginsForJob } from "../src/engine/plugin-loader.ts";
import { microBatch } from "../src/testing/micro-batch.ts";
import { BENCH_MODELS } from "./train.ts";

/** One measured configuration. */
export interface HostOverheadRow {
  model: string;
  adapter: string;
  micro: number;
  seq: number;
  stage: number;
  precision: "fp32" | "bf16";
  steps: number;
  msPerStep: number;
  dispatchesPerStep: number;
  /** Wall time per dispatch (µs). */
  usPerDispatch: number;
  /** Wall time minus the time spent awaiting the device, per dispatch (µs): the host's own cost of
   * recording and submitting. */
  hostUsPerDispatch: number;
  /** Time awaiting the device per step (ms). */
  waitMsPerStep: number;
  /** CPU time of the main thread per dispatch (µs; NaN off Linux): the host's cost, measured apart
   * from the device's even where they share the cores ({@link mainThreadCpuMs}). */
  cpuUsPerDispatch: number;
  /** Main-thread CPU per dispatch outside `queue.submit` and outside host reads/flushes (µs):
   * JavaScript, op planning, encoding through the FFI — the cost of recording. Inside submit is
   * wgpu's submission work plus, on a software adapter, the driver's own work (lavapipe runs the
   * batch inside submit); inside a read is the event pump's polling while the device works. */
  recordCpuUsPerDispatch: number;
  /** Main-thread CPU inside `queue.submit` per step (ms), reads' own submits included. */
  submitCpuMsPerStep: number;
  /** Main-thread CPU inside `read`/`flush` per step (ms): their submit and the polling. */
  readCpuMsPerStep: number;
  readsPerStep: number;
  waitsPerStep: number;
  submitsPerStep: number;
  buffersCreatedPerStep: number;
  buffersReusedPerStep: number;
  bindGroupMissesPerStep: number;
  finalLoss: number;
}

/** Options of {@link benchHostOverhead}. */
export interface HostOverheadOptions {
  model: "llama-small" | "default";
  micro: number;
  seq: number;
  steps: number;
  warmup: number;
  stage: number;
  clip: number;
  precision: "fp32" | "bf16";
  /** Dispatches per command batch (WebGpuBackendOptions.maxBatch); default the backend's. */
  maxBatch?: number;
  /** WebGpuBackendOptions.bufferPoolBytes; default the backend's. */
  poolBytes?: number;
  /** WebGpuBackendOptions.submitAfter; default the backend's. */
  submitAfter?: number;
  /** Override the model's hidden_size (and intermediate_size = 2 × hidden): the same layer
   * structure with less device work, for host measurements on a software adapter. */
  hidden?: number;
}

/** CPU time of the calling (main JS) thread in ms, from Linux's /proc/self/task/<pid>/schedstat
 * (nanoseconds on CPU); NaN where that file does not exist. It counts the host's own work —
 * JavaScript, FFI calls into wgpu-native, polling — and not the device's (lavapipe runs its work on
 * other threads), so it separates host cost from GPU cost even where the two share the cores. */
export function mainThreadCpuMs(): number {
  const f = `/proc/self/task/${process.pid}/schedstat`;
  if (!existsSync(f)) return NaN;
  return Number(readFileSync(f, "utf8").split(" ")[0]) / 1e6;
}

function jobFor(o: HostOverheadOptions): Record<string, unknown> {
  const model = o.model === "default" ? (DEFAULT_JOB.model as Record<string, unknown>) : BENCH_MODELS["llama-small"]!.model;
  return {
    model: {
      ...model,
      ...(o.hidden ? { hidden_size: o.hidden, intermediate_size: 2 * o.hidden } : {}),
      max_position_embeddings: Math.max(o.seq, (model.max_position_embeddings as number | undefined) ?? 0),
    },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: o.seq },
    seed: 1234,
    world_size: 1,
    steps: o.warmup + o.steps,
    train_micro_batch_size_per_gpu: o.micro,
    gradient_accumulation_steps: 1,
    optimizer: { type: "AdamW", params: { lr: 3e-4, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.1 } },
    gradient_clipping: o.clip,
    bf16: { enabled: o.precision === "bf16" },
    zero_optimization: { stage: o.stage },
  };
}

/** Run `warmup + steps` training steps on a fresh webgpu backend and measure the last `steps`. */
export async function benchHostOverhead(o: HostOverheadOptions): Promise<HostOverheadRow> {
  const { config } = resolveJobConfig(jobFor(o), { source: "bench host-overhead" });
  const { backend } = await createBackend("webgpu", { ...(o.maxBatch ? { maxBatch: o.maxBatch } : {}), ...(o.poolBytes !== undefined ? { bufferPoolBytes: o.poolBytes } : {}), ...(o.submitAfter ? { submitAfter: o.submitAfter } : {}) });
  if (!(backend instanceof WebGpuBackend)) throw new Error("bench host-overhead: needs the webgpu backend");
  // main-thread CPU spent inside queue.submit (wgpu's submission work, and a software adapter's
  // execution of the batch), measured around each call
  const queue = backend.device.queue;
  const submit = queue.submit.bind(queue);
  let submitCpu = 0;
  let submitCpuInReads = 0;
  let inRead = false;
  queue.submit = (cbs: Iterable<GPUCommandBuffer>): undefined => {
    const c0 = mainThreadCpuMs();
    try {
      return submit(cbs);
    } finally {
      const c = mainThreadCpuMs() - c0;
      submitCpu += c;
      if (inRead) submitCpuInReads += c;
    }
  };
  // main-thread CPU inside host reads and flushes (their submit, then polling until the device is done)
  let readCpu = 0;
  const timedAsync = <A extends unknown[], R>(f: (...a: A) => Promise<R>) => async (...a: A): Promise<R> => {
    const c0 = mainThreadCpuMs();
    inRead = true;
    try {
      return await f(...a);
    } finally {
      inRead = false;
      readCpu += mainThreadCpuMs() - c0;
    }
  };
  backend.read = timedAsync(backend.read.bind(backend));
  backend.flush = timedAsync(backend.flush.bind(backend));
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend, plugins: await pluginsForJob(config), log: () => {} });
  const vocab = config.model.vocab_size;
  let loss = NaN;
  let before: WebGpuStats | null = null;
  let t0 = 0;
  let cpu0 = 0;
  let sub0 = 0;
  let subR0 = 0;
  let read0 = 0;
  for (let s = 0; s < o.warmup + o.steps; s++) {
    if (s === o.warmup) {
      await backend.flush();
      before = backend.stats();
      t0 = performance.now();
      cpu0 = mainThreadCpuMs();
      sub0 = submitCpu;
      subR0 = submitCpuInReads;
      read0 = readCpu;
    }
    const r = await engine.trainBatch([microBatch(s, 0, o.micro, o.seq, vocab)]);
    loss = r.loss;
  }
  await backend.flush();
  const ms = performance.now() - t0;
  const cpuMs = mainThreadCpuMs() - cpu0;
  const subMs = submitCpu - sub0;
  const readMs = readCpu - read0;
  const subOutsideReadsMs = subMs - (submitCpuInReads - subR0);
  const after = backend.stats();
  const d = (k: Exclude<keyof WebGpuStats, "pooledBytes">): number => (after[k] - before![k]) / o.steps;
  engine.destroy();
  const adapter = backend.info.adapter;
  backend.destroy();
  return {
    model: o.model,
    adapter,
    micro: o.micro,
    seq: o.seq,
    stage: o.stage,
    precision: o.precision,
    steps: o.steps,
    msPerStep: ms / o.steps,
    dispatchesPerStep: d("dispatches"),
    usPerDispatch: (1000 * ms) / (after.dispatches - before!.dispatches),
    hostUsPerDispatch: (1000 * (ms - (after.waitMs - before!.waitMs))) / (after.dispatches - before!.dispatches),
    waitMsPerStep: d("waitMs"),
    cpuUsPerDispatch: (1000 * cpuMs) / (after.dispatches - before!.dispatches),
    recordCpuUsPerDispatch: (1000 * (cpuMs - subOutsideReadsMs - readMs)) / (after.dispatches - before!.dispatches),
    submitCpuMsPerStep: subMs / o.steps,
    readCpuMsPerStep: readMs / o.steps,
    readsPerStep: d("reads"),
    waitsPerStep: d("waits"),
    submitsPerStep: d("submits"),
    buffersCreatedPerStep: d("buffersCreated"),
    buffersReusedPerStep: d("buffersReused"),
    bindGroupMissesPerStep: d("bindGroupMisses"),
    finalLoss: loss,
  };
}

const USAGE = "usage: bun run bench host-overhead [--model llama-small|default] [--micro 1] [--seq 8] [--steps 10] [--warmup 2] [--stage 0] [--clip 1.0] [--precision fp32|bf16] [--max-batch N] [--pool-bytes B] [--submit-after N] [--hidden H] [--json out.json]";

function positiveInt(flag: string, raw: string, min: number): number {
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) throw new Error(`--${flag}: expected an integer ≥ ${min}, got "${raw}"\n${USAGE}`);
  return v;
}

/** CLI entry (`bun run bench host-overhead …`). */
export async function main(args: string[]): Promise<void> {
  let o: HostOverheadOptions;
  let json: string | undefined;
  try {
    const { values } = parseArgs({
      args,
      options: {
        model: { type: "string", default: "llama-small" },
        micro: { type: "string", default: "1" },
        seq: { type: "string", default: "8" },
        steps: { type: "string", default: "10" },
        warmup: { type: "string", default: "2" },
        stage: { type: "string", default: "0" },
        clip: { type: "string", default: "1.0" },
        precision: { type: "string", default: "fp32" },
        json: { type: "string" },
        "max-batch": { type: "string" },
        "pool-bytes": { type: "string" },
        "submit-after": { type: "string" },
        hidden: { type: "string" },
      },
    });
    if (values.model !== "llama-small" && values.model !== "default") throw new Error(`--model: expected llama-small or default, got "${values.model}"\n${USAGE}`);
    if (values.precision !== "fp32" && values.precision !== "bf16") throw new Error(`--precision: expected fp32 or bf16, got "${values.precision}"\n${USAGE}`);
    const clip = Number(values.clip);
    if (!(clip >= 0)) throw new Error(`--clip: expected a number ≥ 0, got "${values.clip}"\n${USAGE}`);
    const stage = positiveInt("stage", values.stage!, 0);
    if (stage > 3) throw new Error(`--stage: expected 0..3, got ${stage}\n${USAGE}`);
    o = {
      model: values.model,
      micro: positiveInt("micro", values.micro!, 1),
      seq: positiveInt("seq", values.seq!, 2),
      steps: positiveInt("steps", values.steps!, 1),
      warmup: positiveInt("warmup", values.warmup!, 0),
      stage,
      clip,
      precision: values.precision,
      maxBatch: values["max-batch"] === undefined ? undefined : positiveInt("max-batch", values["max-batch"], 1),
      poolBytes: values["pool-bytes"] === undefined ? undefined : positiveInt("pool-bytes", values["pool-bytes"], 0),
      submitAfter: values["submit-after"] === undefined ? undefined : positiveInt("submit-after", values["submit-after"], 1),
      hidden: values.hidden === undefined ? undefined : positiveInt("hidden", values.hidden, 8),
    };
    json = values.json;
  } catch (e) {
    console.error((e as Error).message);
    process.exit(2);
  }
  const row = await benchHostOverhead(o);
  console.log(
    `${row.model} ${row.precision} stage ${row.stage} micro ${row.micro} × seq ${row.seq} on ${row.adapter}: ` +
      `${row.msPerStep.toFixed(2)} ms/step, ${row.dispatchesPerStep.toFixed(0)} dispatches/step, ${row.usPerDispatch.toFixed(1)} µs/dispatch wall, ${row.cpuUsPerDispatch.toFixed(1)} µs/dispatch main-thread CPU (${row.recordCpuUsPerDispatch.toFixed(1)} recording: outside submits and reads; per step ${row.submitCpuMsPerStep.toFixed(2)} ms in submits, ${row.readCpuMsPerStep.toFixed(2)} ms in reads), ${row.hostUsPerDispatch.toFixed(1)} µs/dispatch not awaiting the device (awaiting ${row.waitMsPerStep.toFixed(2)} ms/step); ` +
      `per step: ${row.readsPerStep} reads, ${row.waitsPerStep} waits, ${row.submitsPerStep} submits, ${row.buffersCreatedPerStep} buffers created, ${row.buffersReusedPerStep} reused, ${row.bindGroupMissesPerStep} bind-group misses (loss ${row.finalLoss.toFixed(4)})`,
  );
  if (json) writeFileSync(json, JSON.stringify(row, null, 2) + "\n");
}

if (import.meta.main) await main(process.argv.slice(2));
