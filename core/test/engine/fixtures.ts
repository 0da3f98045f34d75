/**
 * Shared helpers of the engine tests: tiny job configs, deterministic micro-batches, and a rank
 * entry that trains a few steps and returns parameters, losses, memory and comm figures.
 *
 * Launch with `launch({ worldSize, entry: FIXTURE_ENTRY, args })` (core/src/launch): `args` is one
 * {@link TrainArgs} (the rank returns one {@link TrainOut}) or `{ runs: TrainArgs[] }` (the rank
 * trains each job in turn, each on a fresh backend and engine, and returns a `TrainOut[]` — one
 * launch of the workers for several jobs keeps the tests fast).
 */
import { CpuBackend } from "@zeromoe/kernels";
import type { Communicator } from "../../src/comm/communicator.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugins.ts";

/** Absolute path of this module, the rank entry for `launch`. */
export const FIXTURE_ENTRY: string = import.meta.path;

/** The tiny mixtral of the smoke tests (every unit's element count divisible by 2, 3 and 4). */
export function tinyModel(): Record<string, unknown> {
  return {
    model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2,
    num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 3, num_experts_per_tok: 2,
    max_position_embeddings: 32, router_aux_loss_coef: 0.02, output_router_logits: true,
  };
}

/**
 * A tiny mixtral with awkward sizes: hidden 25 (odd), head_dim 6 ≠ hidden/heads, vocab 257 (prime),
 * intermediate 7. Unit element counts: embed 6425, each layer 1325, each expert 525, head 6450;
 * Ψ = 18675. They are not multiples of 2, 3 or 4 (except the expert by 3), so shards carry padding
 * at world sizes 2, 3 and 4.
 */
export function awkwardModel(): Record<string, unknown> {
  return {
    model_type: "mixtral", vocab_size: 257, hidden_size: 25, head_dim: 6, intermediate_size: 7, num_hidden_layers: 2,
    num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 3, num_experts_per_tok: 2,
    max_position_embeddings: 32, router_aux_loss_coef: 0.02, output_router_logits: true,
  };
}

/** Element count of {@link awkwardModel} (sum over its units). */
export const AWKWARD_NUMEL = 18675;

/** Raw job JSON of a tiny model; `over` replaces top-level keys (shallow). */
export function tinyJob(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: tinyModel(),
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 7 },
    seed: 7,
    backend: "cpu",
    train_micro_batch_size_per_gpu: 2,
    optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0.1 } },
    ...over,
  };
}

/** Deterministic micro-batch `slot` of step `step` (ids depend only on (step, slot)); ids are drawn
 * from [0, idRange), by default the byte range min(vocab, 256). */
export function microBatch(step: number, slot: number, batch: number, seq: number, vocab: number, idRange: number = Math.min(vocab, 256)): TrainMicroBatch {
  const ids = new Int32Array(batch * seq);
  let x = (step * 7919 + slot * 104729 + 12345) >>> 0;
  for (let i = 0; i < ids.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids[i] = x % idRange;
  }
  return { inputIds: ids, labels: ids, batch, seq };
}

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
  /** Hook owners (e.g. reduce: "zero3+grad-noise"). */
  owners: Record<string, string>;
  /** Lines the engine and plugins logged on this rank. */
  logs: string[];
  /** Gather-hook statistics when the hook reports them (zero3). */
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

/** Every parameter of the engine's model as f32 values by name: a unit's shard is all_gathered over
 * its group where the parameters are sharded (collective: every rank of the world calls it). */
export async function gatherFullParams(engine: Engine, comm: Communicator): Promise<Record<string, number[]>> {
  const be = engine.env.be;
  const params: Record<string, number[]> = {};
  for (const st of engine.states) {
    const u = st.unit;
    const buf = st.paramShard ?? u.data!;
    const n = st.paramShard ? st.plan.shardSize : u.numel;
    const f32 = be.alloc("f32", Math.max(1, n), "other");
    if (n > 0) {
      if (buf.dtype === "f32") be.copy({ buf, off: 0 }, { buf: f32, off: 0 }, n);
      else be.cast({ buf, off: 0 }, { buf: f32, off: 0 }, n);
    }
    const host = Float32Array.from((await be.read({ buf: f32, off: 0 }, n)) as Float32Array);
    be.free(f32);
    const full = st.paramShard ? (await comm.allGather(host, undefined, { group: st.plan.group })).subarray(0, u.numel) : host;
    for (const p of u.params) params[p.name] = Array.from(full.subarray(p.offset, p.offset + p.numel));
  }
  return params;
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
