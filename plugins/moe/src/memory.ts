/**
 * Model-state memory per rank with expert parallelism (docs/domain.md §1, ZeRO paper §5, with Ψ split
 * into a dense part Ψ_d and an expert part Ψ_e = all experts of all layers).
 *
 * Per parameter: a bytes of parameters, g of gradients, o of optimizer states — mixed precision
 * (bf16/fp16) a = 2, g = 2, o = 12 (fp32 master, m, v); fp32 training a = 4, g = 4, o = 8.
 * Dense parameters live on every rank and are partitioned over the dp group (N = world_size ranks).
 * An EP group of P = ep_size ranks holds one full set of experts, so a rank holds X_e = Ψ_e / P
 * expert parameters, partitioned over its edp group of N_e = N / P ranks. With X_d = Ψ_d:
 *
 * | stage | bytes per rank (each part: X over n ranks, X_d over N and X_e over N_e)  |
 * |-------|--------------------------------------------------------------------------|
 * | 0     | (a + g + o)·X                                                            |
 * | 1     | (a + g)·X + o·X/n                                                        |
 * | 2     | a·X + (g + o)·X/n                                                        |
 * | 3     | (a + g + o)·X/n                                                          |
 *
 * summed over the two parts. Note X_e/N_e = Ψ_e/N: sharded expert states cost the same per rank as
 * if every rank held every expert's shard, while unsharded expert states shrink by P.
 * Example (mixed, stage 3): 16Ψ_d/N + 16Ψ_e/N; stage 0: 16Ψ_d + 16Ψ_e/P.
 * Shards are padded so every rank of a group holds the same count (plan.ts); padding is extra and
 * reported separately (engine `paddingBytes`), as are activations, gathered ZeRO-3 parameters and
 * communication buffers.
 */
import { partitionedBytes, type MemoryEstimateInput, type MemoryPart } from "@zeromoe/core/plugin";

/** Inputs of {@link moeModelStateBytes}. */
export interface MoEMemoryInputs {
  /** Dense parameter elements (everything but the experts). */
  denseParams: number;
  /** Expert parameter elements of ALL experts of all layers. */
  expertParams: number;
  /** world_size (N). */
  worldSize: number;
  /** ep_size (P). */
  epSize: number;
  /** ZeRO stage 0–3. */
  stage: 0 | 1 | 2 | 3;
  /** bf16/fp16 mixed precision (2 + 2 + 12 bytes) or fp32 (4 + 4 + 8). */
  mixed: boolean;
}

/** Per-rank model-state bytes by part and kind (see the module comment). */
export interface MoEMemoryBreakdown {
  dense: { params: number; grads: number; optim: number };
  expert: { params: number; grads: number; optim: number };
  total: number;
}

/** Per-rank model-state bytes without padding (module comment).
 * @throws when world_size % ep_size ≠ 0 or the stage is not 0–3. */
export function moeModelStateBytes(inp: MoEMemoryInputs): MoEMemoryBreakdown {
  const { denseParams: D, expertParams: X, worldSize: N, epSize: P, stage, mixed } = inp;
  if (!Number.isInteger(N) || !Number.isInteger(P) || P < 1 || N % P !== 0) throw new Error(`moe memory: world_size ${N} is not divisible by ep_size ${P}`);
  if (![0, 1, 2, 3].includes(stage)) throw new Error(`moe memory: stage must be 0–3, got ${stage}`);
  const a = mixed ? 2 : 4;
  const g = mixed ? 2 : 4;
  const o = mixed ? 12 : 8;
  const part = (x: number, n: number) => ({
    params: stage >= 3 ? (a * x) / n : a * x,
    grads: stage >= 2 ? (g * x) / n : g * x,
    optim: stage >= 1 ? (o * x) / n : o * x,
  });
  const dense = part(D, N);
  const expert = part(X / P, N / P);
  const total = dense.params + dense.grads + dense.optim + expert.params + expert.grads + expert.optim;
  return { dense, expert, total };
}

/**
 * The MoE plugin's contribution to the up-front memory estimate (core memory-estimate.ts, plugin
 * field `memory.layout`): the `expert` part that core counts on every rank becomes Ψ_e/P elements
 * per rank (an EP group of P = ep_size ranks holds one full set of experts), partitioned over the
 * edp group of N/P ranks; its bytes restart replicated, and the stage plugins' `partition` shards
 * them over that group — the {@link moeModelStateBytes} formula above. With expert tensor
 * parallelism (moe.etp_size T) P·T ranks hold one replica: Ψ_e/(P·T) per rank over N/(P·T).
 * @throws Error when world_size % ep_size ≠ 0.
 */
export function moeMemoryLayout(parts: MemoryPart[], input: MemoryEstimateInput): MemoryPart[] {
  const N = input.config.world_size;
  const P = input.config.moe?.ep_size ?? 1;
  const T = input.config.moe?.etp_size ?? 1;
  if (!(Number.isInteger(N) && Number.isInteger(P) && P >= 1 && N % P === 0)) throw new Error(`moe memory: world_size ${N} is not divisible by moe.ep_size ${P}`);
  if (!(Number.isInteger(T) && T >= 1 && N % (P * T) === 0)) throw new Error(`moe memory: world_size ${N} is not divisible by moe.ep_size × moe.etp_size = ${P} × ${T}`);
  // an ep × etp block of P·T ranks holds one replica of the experts (expert-tp.ts etpModelStateBytes)
  const B = P * T;
  return parts.map((q) => {
    if (q.name !== "expert") return q;
    const elements = q.elements / B;
    return partitionedBytes({ ...q, elements, groupSize: q.groupSize / B }, input, "replicated", "replicated", "replicated");
  });
}
