/**
 * A rank entry for plugin tests: trains a job for a few steps on a fresh cpu backend and engine and
 * returns parameters, losses, memory, padding, comm figures, hook owners and logs.
 * Exported as `@zeromoe/core/testing`.
 *
 * Launch with `launch({ worldSize, entry: FIXTURE_ENTRY, args })` (`@zeromoe/core/launch`): `args`
 * is one {@link TrainArgs} (the rank returns one {@link TrainOut}) or `{ runs: TrainArgs[] }` (the
 * rank trains each job in turn, each on a fresh backend and engine, and returns a `TrainOut[]` — one
 * launch of the workers for several jobs keeps the tests fast). The global batch is the same for
 * every world size: rank r of n takes micro-batch slots r, r + n, … of each step ({@link microBatch}).
 */
import { CpuBackend } from "@zeromoe/kernels";
import type { Communicator } from "../comm/communicator.ts";
import { resolveJobConfig } from "../config/index.ts";
import { Engine, type TrainMicroBatch } from "../engine/engine.ts";
import { pluginsForJob } from "../engine/plugin-loader.ts";
import { gatherFullParams } from "./gather-full-params.ts";
import { microBatch } from "./micro-batch.ts";

/** Absolute path of this module, the rank entry for `launch`. */
export const FIXTURE_ENTRY: string = import.meta.filename;

/** Arguments of {@link trainRank}. */
export interface TrainArgs {
  job: Record<string, unknown>;
  steps: number;
  /** Free-form label, echoed in {@link TrainOut.label}. */
  label?: string;
}

/** Several jobs for one launch (see the module comment). */
export interface TrainManyArgs {
  runs: TrainArgs[];
}

/** Bytes of padding this rank holds, per tag (param, grad, optim); sums to `padding`. */
export type PadByTag = { param: number; grad: number; optim: number };

/** What a rank returns: its full parameters (gathered), losses, memory and comm bytes. */
export interface TrainOut {
  label?: string;
  losses: number[];
  gradNorms: number[];
  params: Record<string, number[]>;
  /** Backend memory accounting after the last step (current) and over the run (peak), bytes. */
  memory: { current: Record<string, number>; peak: Record<string, number> };
  /** `engine.paddingBytes()`. */
  padding: number;
  /** Padding per tag, recomputed here from the shard plans. */
  padByTag: PadByTag;
  /** Bytes sent per collective (comm stats) over all steps. */
  comm: Record<string, number>;
  /** Calls per collective over all steps. */
  calls: Record<string, number>;
  /** Ψ: elements of all units this rank holds. */
  numel: number;
  /** Elements of units whose parameters are sharded / replicated on this rank. */
  shardedNumel: number;
  replicatedNumel: number;
  /** Owner of each hook: "core" or the claiming plugin, wrappers appended with "+" (e.g. reduce: "<stage plugin>+<wrapping plugin>"). */
  owners: Record<string, string>;
  /** Lines the engine and plugins logged on this rank. */
  logs: string[];
  /** Gather-hook statistics when the gather hook reports them (a `stats()` method). */
  gatherStats?: { fetches: number; peakLiveElements: number };
}

/** Train `steps` steps on this rank; the global batch is the same for every world size: rank r of
 * n takes micro-batch slots r, r + n, … of each step. */
export async function trainRank(comm: Communicator, args: TrainArgs): Promise<TrainOut> {
  const { config } = resolveJobConfig({ ...args.job, world_size: comm.worldSize });
  const be = new CpuBackend();
  const logs: string[] = [];
  const engine = await Engine.create({ config, comm, backend: be, plugins: await pluginsForJob(config), log: (m) => logs.push(m) });
  const micro = config.train_micro_batch_size_per_gpu;
  const accum = config.gradient_accumulation_steps;
  const seq = config.data.seq_len;
  const losses: number[] = [];
  const gradNorms: number[] = [];
  comm.resetStats();
  for (let s = 0; s < args.steps; s++) {
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < accum; a++) mbs.push(microBatch(s, a * comm.worldSize + comm.rank, micro, seq, config.model.vocab_size));
    const r = await engine.trainBatch(mbs);
    losses.push(r.loss);
    gradNorms.push(r.gradNorm);
  }
  const stats = comm.stats();
  const commBytes: Record<string, number> = {};
  const calls: Record<string, number> = {};
  for (const [k, v] of Object.entries(stats)) {
    commBytes[k] = v.bytesSent;
    calls[k] = v.calls;
  }
  const mem = be.memory();
  const padding = engine.paddingBytes();
  const mixed = engine.env.paramDtype !== "f32";
  const padByTag: PadByTag = { param: 0, grad: 0, optim: 0 };
  let shardedNumel = 0;
  let replicatedNumel = 0;
  for (const st of engine.states) {
    const pad = st.plan.shardSize - st.plan.owned;
    const b = st.unit.dtype === "f32" ? 4 : 2;
    if (st.plan.params === "sharded") padByTag.param += pad * b;
    if (st.plan.grads === "sharded") padByTag.grad += pad * b;
    if (st.plan.optim === "sharded") padByTag.optim += pad * (mixed ? 12 : 8);
    if (st.plan.params === "sharded") shardedNumel += st.unit.numel;
    else replicatedNumel += st.unit.numel;
  }
  const gatherStats = (engine.hooks.gather as { stats?: () => { fetches: number; peakLiveElements: number } }).stats?.();
  const params = await gatherFullParams(engine, comm);
  engine.destroy();
  return {
    label: args.label, losses, gradNorms, params, memory: { current: mem.current, peak: mem.peak }, padding, padByTag,
    comm: commBytes, calls, numel: engine.model.units.numel, shardedNumel, replicatedNumel, owners: engine.hookOwners, logs, gatherStats,
  };
}

/** Rank entry: one job or several (see the module comment). */
export default async function main(comm: Communicator, _rank: number, _ws: number, args: TrainArgs | TrainManyArgs): Promise<TrainOut | TrainOut[]> {
  if ("runs" in args) {
    const out: TrainOut[] = [];
    for (const r of args.runs) out.push(await trainRank(comm, r));
    return out;
  }
  return trainRank(comm, args);
}
