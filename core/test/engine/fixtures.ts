/**
 * Shared helpers of the engine tests: a tiny job config, deterministic micro-batches, and a rank
 * entry that trains a few steps and returns parameters, losses, memory and comm figures.
 */
import { CpuBackend } from "../../../kernels/src/cpu/index.ts";
import type { Communicator } from "../../src/comm/communicator.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine, type TrainMicroBatch } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugins.ts";

/** Raw job JSON of a tiny model; `over` is deep-merged by the caller's spread. */
export function tinyJob(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: {
      model_type: "mixtral", vocab_size: 256, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2,
      num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 3, num_experts_per_tok: 2,
      max_position_embeddings: 32, router_aux_loss_coef: 0.02, output_router_logits: true,
    },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 7 },
    seed: 7,
    backend: "cpu",
    train_micro_batch_size_per_gpu: 2,
    optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0.1 } },
    ...over,
  };
}

/** Deterministic micro-batch `slot` of step `step` (ids depend only on (step, slot)). */
export function microBatch(step: number, slot: number, batch: number, seq: number, vocab: number): TrainMicroBatch {
  const ids = new Int32Array(batch * seq);
  let x = (step * 7919 + slot * 104729 + 12345) >>> 0;
  for (let i = 0; i < ids.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    ids[i] = x % vocab;
  }
  return { inputIds: ids, labels: ids, batch, seq };
}

/** Arguments of {@link trainRank}. */
export interface TrainArgs {
  job: Record<string, unknown>;
  steps: number;
}

/** What a rank returns: its full parameters (gathered), losses, memory and comm bytes. */
export interface TrainOut {
  losses: number[];
  params: Record<string, number[]>;
  memory: { current: Record<string, number>; peak: Record<string, number> };
  padding: number;
  comm: Record<string, number>;
  numel: number;
}

/** Train `steps` steps on this rank; the global batch is the same for every world size: rank r of
 * n takes micro-batch slots r, r + n, … of each step. */
export async function trainRank(comm: Communicator, args: TrainArgs): Promise<TrainOut> {
  const { config } = resolveJobConfig({ ...args.job, world_size: comm.worldSize });
  const be = new CpuBackend();
  const engine = await Engine.create({ config, comm, backend: be, plugins: await pluginsForJob(config), log: () => {} });
  const micro = config.train_micro_batch_size_per_gpu;
  const accum = config.gradient_accumulation_steps;
  const seq = config.data.seq_len;
  const losses: number[] = [];
  comm.resetStats();
  for (let s = 0; s < args.steps; s++) {
    const mbs: TrainMicroBatch[] = [];
    for (let a = 0; a < accum; a++) mbs.push(microBatch(s, a * comm.worldSize + comm.rank, micro, seq, config.model.vocab_size));
    losses.push((await engine.trainBatch(mbs)).loss);
  }
  const stats = comm.stats();
  const commBytes: Record<string, number> = {};
  for (const [k, v] of Object.entries(stats)) commBytes[k] = v.bytesSent;
  const mem = be.memory();
  const padding = engine.paddingBytes();
  // collect full parameters (all_gather shards where sharded) for comparison
  const params: Record<string, number[]> = {};
  for (const st of engine.states) {
    const u = st.unit;
    let full: Float32Array;
    if (st.paramShard) {
      const shard = await be.read({ buf: st.paramShard, off: 0 }, st.plan.shardSize);
      const g = await comm.allGather(Float32Array.from(shard as Float32Array), undefined, { group: st.plan.group });
      full = g.subarray(0, u.numel);
    } else full = Float32Array.from((await be.read({ buf: u.data!, off: 0 }, u.numel)) as Float32Array);
    for (const p of u.params) params[p.name] = Array.from(full.subarray(p.offset, p.offset + p.numel));
  }
  return { losses, params, memory: { current: mem.current, peak: mem.peak }, padding, comm: commBytes, numel: engine.model.units.numel };
}

export default async function main(comm: Communicator, _rank: number, _ws: number, args: TrainArgs): Promise<TrainOut> {
  return trainRank(comm, args);
}
