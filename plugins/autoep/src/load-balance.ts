/**
 * Auxiliary-loss-free load balancing (Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing
 * Strategy for Mixture-of-Experts"; DeepSeek-V3 §2.1.2; DeepSpeed AutoEP's `load_balance_coeff`,
 * following torchtitan's expert-bias update): every MoE layer has a per-expert bias b [E] that is
 * added to the router scores for the CHOICE of experts only (RoutingRequest.selectionBias; the
 * combine weights stay the unbiased scores). After each optimizer step, with c_e the number of
 * (token, slot) picks of expert e in that step summed over every micro-batch and every rank
 * (pre-drop counts, all_reduce over dp):
 *
 *   d_e = γ · sign(mean(c) − c_e)          (γ = load_balance_coeff; sign(0) = 0)
 *   b_e ← b_e + (d_e − mean(d))            (centred, as torchtitan; f32)
 *
 * so overloaded experts are picked less and idle ones more. The update runs identically on every
 * rank (same reduced counts), so the biases stay equal everywhere without a broadcast.
 */
import type { Communicator, Group } from "@zeromoe/core/comm";

/** Per-layer expert biases and the step's counts (module comment). */
export class ExpertBiasBalancer {
  /** γ (load_balance_coeff). */
  readonly coeff: number;
  /** The live bias arrays, by decoder layer (the MoE layers' routing.selectionBias). */
  readonly biases: Map<number, Float32Array>;
  private readonly counts: Map<number, Float64Array>;
  /** Updates applied so far. */
  updates = 0;

  /** @param biases the live arrays, one per MoE layer (E entries each) */
  constructor(coeff: number, biases: Map<number, Float32Array>) {
    if (!(coeff >= 0) || !Number.isFinite(coeff)) throw new Error(`expert_parallel.load_balance_coeff must be a finite number ≥ 0, got ${coeff}`);
    this.coeff = coeff;
    this.biases = biases;
    this.counts = new Map([...biases].map(([l, b]) => [l, new Float64Array(b.length)]));
  }

  /** Add one micro-batch's pre-drop picks of layer `layer` ([E], Σ = tokens · k). */
  observe(layer: number, counts: ArrayLike<number>): void {
    const c = this.counts.get(layer);
    if (!c) return; // not a balanced layer
    if (counts.length !== c.length) throw new Error(`load balancing: layer ${layer} reported ${counts.length} expert counts, it has ${c.length} experts`);
    for (let e = 0; e < c.length; e++) c[e]! += counts[e]!;
  }

  /** End of a step on EVERY rank: all_reduce the counts over `group`, update every bias, reset
   * the counts. Returns the reduced counts by layer (for statistics). */
  async step(comm: Communicator, group: Group): Promise<Map<number, Float64Array>> {
    const layers = [...this.counts.keys()];
    const E = layers.length > 0 ? this.counts.get(layers[0]!)!.length : 0;
    const flat = new Float64Array(layers.length * E);
    layers.forEach((l, i) => flat.set(this.counts.get(l)!, i * E));
    if (group.size > 1) await comm.allReduce(flat, { group });
    const out = new Map<number, Float64Array>();
    layers.forEach((l, i) => {
      const c = flat.subarray(i * E, (i + 1) * E);
      out.set(l, Float64Array.from(c));
      applyBiasUpdate(this.biases.get(l)!, c, this.coeff);
      this.counts.get(l)!.fill(0);
    });
    this.updates++;
    return out;
  }
}

/** One expert-bias update in place (module comment): bias [E] f32, counts [E]. */
export function applyBiasUpdate(bias: Float32Array, counts: ArrayLike<number>, coeff: number): void {
  const E = bias.length;
  let mean = 0;
  for (let e = 0; e < E; e++) mean += counts[e]!;
  mean /= E;
  const d = new Float64Array(E);
  let dMean = 0;
  for (let e = 0; e < E; e++) {
    d[e] = coeff * Math.sign(mean - counts[e]!);
    dMean += d[e]!;
  }
  dMean /= E;
  for (let e = 0; e < E; e++) bias[e] = Math.fround(bias[e]! + Math.fround(d[e]! - dMean));
}
