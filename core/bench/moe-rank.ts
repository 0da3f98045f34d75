/**
 * Rank entry of the MoE benchmark (moe.ts): trains each run's job for warm-up + timed steps on
 * synthetic token batches and returns this rank's figures. With `skew`, the router's choices are
 * replaced by a Zipf-skewed draw (expert e chosen with probability ∝ 1/(e+1)^skew, k distinct
 * experts per token, Philox stream per (rank, step, micro-batch, layer)) so that some experts are
 * much hotter than others. Not a benchmark of its own (the leading `_` hides it).
 */
import { readFileSync } from "node:fs";
import { CpuBackend } from "@zeromoe/kernels";
import type { Communicator } from "../src/comm/communicator.ts";
import { resolveJobConfig } from "../src/config/index.ts";
import { Engine, type TrainMicroBatch } from "../src/engine/engine.ts";
import type { EngineEnv } from "../src/engine/hooks.ts";
import { pluginsForJob } from "../src/engine/plugin-loader.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import type { GatingRequest, MoERouter, RoutingDecision, RoutingRequest } from "../src/nn/moe/index.ts";
import { streamKey, uniformFill } from "../src/tensor/random.ts";
import { createMoEPlugin, moeStateOf } from "@zeromoe/plugin-moe";

/** One benchmark run. */
export interface MoeBenchRun {
  label: string;
  job: Record<string, unknown>;
  warmup: number;
  steps: number;
  /** Zipf exponent of the forced routing (null: the model's router). */
  skew: number | null;
  /** Measured loads for `balanced` placement. */
  loads?: number[][];
}

/** This rank's figures of one run. */
export interface MoeBenchRankOut {
  /** Wall seconds of each timed step. */
  stepSeconds: number[];
  /** CPU seconds this rank's thread used in each timed step (Linux /proc/thread-self/stat, user +
   * system, 10 ms ticks; NaN where unavailable): its own work, whatever else shares the cores. */
  cpuSeconds: number[];
  /** all_to_all_v bytes this rank sent per timed step (nominal, docs/comm.md), and ms inside it. */
  a2aBytesPerStep: number;
  a2aMsPerStep: number;
  /** Rows this rank's experts processed per timed step (all layers). */
  expertRowsPerStep: number;
  /** Skewed runs: this rank's expert choices per layer over the timed steps ([] otherwise). */
  counts: number[][];
  tokensPerStep: number;
}

class SkewGate implements MoERouter {
  readonly name = "zipf";
  /** counts[layer][expert] of the choices made while `counting`. */
  readonly counts: number[][] = [];
  counting = false;
  constructor(private readonly inner: MoERouter, private readonly env: EngineEnv, private readonly s: number) {}
  get mixtralAuxCoef(): number | null {
    return this.inner.mixtralAuxCoef;
  }
  gating(req: GatingRequest) {
    return this.inner.gating(req);
  }
  async routing(req: RoutingRequest): Promise<RoutingDecision> {
    const d = await this.inner.routing(req);
    const { numExperts: E, topK: k } = req;
    const T = req.logits.shape[0]!;
    const w = Array.from({ length: E }, (_, e) => 1 / (e + 1) ** this.s);
    const u = new Float64Array(T * k * 4);
    uniformFill(u, streamKey(99, `skew/${this.env.comm.rank}/${this.env.phase.step}/${this.env.micro.index}/${req.layer}`), 0);
    const idx = new Int32Array(T * k);
    const counts = new Int32Array(E);
    let q = 0;
    for (let t = 0; t < T; t++) {
      const taken = new Set<number>();
      for (let s = 0; s < k; s++) {
        let tot = 0;
        for (let e = 0; e < E; e++) if (!taken.has(e)) tot += w[e]!;
        let r = u[q++ % u.length]! * tot;
        let pick = -1;
        for (let e = 0; e < E; e++) {
          if (taken.has(e)) continue;
          pick = e;
          r -= w[e]!;
          if (r < 0) break;
        }
        taken.add(pick);
        idx[t * k + s] = pick;
        counts[pick]!++;
      }
    }
    if (this.counting && !this.env.phase.backward) {
      const row = (this.counts[req.layer] ??= new Array<number>(E).fill(0));
      counts.forEach((c, e) => (row[e]! += c));
    }
    return { ...d, topkIndices: idx, counts };
  }
}

/** CPU seconds used so far by the calling thread (NaN when /proc is unavailable). */
function threadCpuSeconds(): number {
  try {
    const f = readFileSync("/proc/thread-self/stat", "utf8");
    const rest = f.slice(f.lastIndexOf(")") + 2).split(" "); // fields from 3 (state) on
    return (Number(rest[11]) + Number(rest[12])) / 100; // utime, stime (fields 14, 15) in ticks of 1/100 s
  } catch {
    return Number.NaN;
  }
}

function batch(step: number, slot: number, b: number, seq: number, vocab: number): TrainMicroBatch {
  const ids = new Int32Array(b * seq);
  let x = (step * 7919 + slot * 104729 + 12345) >>> 0;
  for (let i = 0; i < ids.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids[i] = x % vocab;
  }
  return { inputIds: ids, labels: ids, batch: b, seq };
}

async function one(comm: Communicator, r: MoeBenchRun): Promise<MoeBenchRankOut> {
  const { config } = resolveJobConfig({ ...r.job, world_size: comm.worldSize });
  const be = new CpuBackend();
  const plugins = (await pluginsForJob(config)).map((p) => (p.name === "moe" && r.loads ? createMoEPlugin({ loads: r.loads }) : p));
  const engine = await Engine.create({ config, comm, backend: be, plugins, log: () => {} });
  const model = engine.model as MixtralForCausalLM;
  const skew = r.skew !== null ? new SkewGate(model.moe.router, engine.env, r.skew) : null;
  if (skew) model.moe.router = skew;
  const st = moeStateOf(engine.env)!;
  const micro = config.train_micro_batch_size_per_gpu;
  const accum = config.gradient_accumulation_steps;
  const seq = config.data.seq_len;
  const stepSeconds: number[] = [];
  const cpuSeconds: number[] = [];
  let rows = 0;
  const L = config.model.num_hidden_layers;
  for (let s = 0; s < r.warmup + r.steps; s++) {
    if (s === r.warmup) {
      comm.resetStats();
      if (skew) skew.counting = true;
    }
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < accum; a++) mbs.push(batch(s, a * comm.worldSize + comm.rank, micro, seq, config.model.vocab_size));
    await comm.barrier();
    const t0 = performance.now();
    const c0 = threadCpuSeconds();
    let stepRows = 0;
    if (st.dispatcher) {
      // rows this rank's experts receive: read the exchange of every layer after each forward
      const orig = model.forward.bind(model);
      model.forward = async (inp) => {
        const out = await orig(inp);
        for (const x of st.dispatcher!.lastExchange) stepRows += x.receivedRows.reduce((a, b) => a + b, 0);
        return out;
      };
      await engine.trainBatch(mbs);
      model.forward = orig;
    } else {
      await engine.trainBatch(mbs);
      stepRows = micro * seq * accum * config.moe!.k * L;
    }
    const dt = (performance.now() - t0) / 1000;
    const dc = threadCpuSeconds() - c0;
    await st.stats.reduceStep(comm, engine.env.groups.dp);
    if (s >= r.warmup) {
      stepSeconds.push(dt);
      cpuSeconds.push(dc);
      rows += stepRows;
    }
  }
  const a2a = comm.stats().all_to_all_v;
  engine.destroy();
  return {
    stepSeconds,
    cpuSeconds,
    a2aBytesPerStep: a2a.bytesSent / r.steps,
    a2aMsPerStep: a2a.timeMs / r.steps,
    expertRowsPerStep: rows / r.steps,
    counts: skew ? skew.counts : [],
    tokensPerStep: micro * seq * accum * comm.worldSize,
  };
}

export default async function main(comm: Communicator, _rank: number, _n: number, args: { runs: MoeBenchRun[] }): Promise<MoeBenchRankOut[]> {
  const out: MoeBenchRankOut[] = [];
  for (const r of args.runs) out.push(await one(comm, r));
  return out;
}
