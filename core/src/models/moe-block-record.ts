/**
 * What a sparse MoE decoder keeps of each MoE layer of its last forward — Mixtral (mixtral.ts) and
 * the Qwen/DeepSeek family (sparse-moe-decoder.ts) alike — and the three things both do with it:
 * hand its tensors to activation checkpointing (llama.ts `CausalDecoder.layerOutputsToKeep`), take
 * back their recomputed copies in that same order (`adoptLayerOutputs`), and sum the forward's extra
 * loss: Hugging Face's load-balancing loss (nn/moe/aux-fractions.ts loadBalancingLoss) times its
 * coefficient, plus the routers' per-layer weighted losses.
 */
import type { Backend } from "@zeromoe/kernels";
import { layerCountsF32, loadBalancingLoss, type BlockRoutingStats } from "../nn/moe/aux-fractions.ts";
import type { RoutingDecision } from "../nn/moe/router.ts";
import { add, mean, scale } from "../tensor/index.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** Per MoE layer of the last forward: mean router probability [E], pre-drop counts (host, device
 * u32, device f32: see {@link BlockRoutingStats}), gate loss. */
export interface MoEBlockRecord extends BlockRoutingStats {
  countsF32: Tensor | null;
  /** The gate's weighted extra loss of this layer (Switch/GShard aux, z-loss), or null. */
  gateLoss: Tensor | null;
}

/** The record of one MoE layer's routing `decision` on its `tokens` rows (probs [tokens, E]):
 * the mean router probability, the counts where they are (host, or device u32, plus the f32 device
 * counts of aux-fractions.ts layerCountsF32 on a device backend), the gate's loss. */
export function moeBlockRecord(be: Backend, decision: RoutingDecision, numExperts: number, tokens: number): MoEBlockRecord {
  const d = decision;
  const countsF32 = layerCountsF32(be, d, numExperts, tokens);
  return { routerProbMean: mean(d.probs, 0), expertCounts: d.counts, countsDevice: d.counts ? null : (d.expertCounts ?? null), countsF32, gateLoss: d.loss };
}

/** The record's tensors that activation checkpointing must keep from a layer's forward, in the
 * order {@link adoptBlockTensors} takes them back: routerProbMean, then gateLoss, countsDevice,
 * countsF32 where present. None for a layer without a record (a dense layer). */
export function blockTensorsToKeep(b: MoEBlockRecord | undefined): Tensor[] {
  if (!b) return [];
  return [b.routerProbMean, ...(b.gateLoss ? [b.gateLoss] : []), ...(b.countsDevice ? [b.countsDevice] : []), ...(b.countsF32 ? [b.countsF32] : [])];
}

/** Replace the record's tensors by their recomputed copies `extras` (the order of
 * {@link blockTensorsToKeep}). */
export function adoptBlockTensors(b: MoEBlockRecord | undefined, extras: Tensor[]): void {
  if (!b) return;
  let i = 0;
  if (extras[i]) b.routerProbMean = extras[i++]!;
  if (b.gateLoss && extras[i]) b.gateLoss = extras[i++]!;
  if (b.countsDevice && extras[i]) b.countsDevice = extras[i++]!;
  if (b.countsF32 && extras[i]) b.countsF32 = extras[i++]!;
}

/** The extra loss of a forward whose MoE layers left `blocks` (non-empty) on `tokens` tokens:
 * `aux` = the load-balancing loss before its coefficient (aux-fractions.ts loadBalancingLoss), and
 * `extra` = auxCoef · aux (when auxCoef is not null) plus every layer's gate loss, or null when there
 * is neither. */
export async function moeExtraLoss(be: Backend, blocks: MoEBlockRecord[], numExperts: number, tokens: number, auxCoef: number | null): Promise<{ aux: Tensor; extra: Tensor | null }> {
  const aux = await loadBalancingLoss(be, blocks, numExperts, tokens);
  let extra: Tensor | null = auxCoef !== null ? scale(aux, auxCoef) : null;
  for (const b of blocks) if (b.gateLoss) extra = extra ? add(extra, b.gateLoss) : b.gateLoss;
  return { aux, extra };
}
