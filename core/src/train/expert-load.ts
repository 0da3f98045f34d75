/**
 * Expert load statistics of a run (domain.md §4 "Load statistics"): how many of the flattened
 * [tokens·k] routing choices went to each expert of each MoE layer, summed over every training
 * forward of this rank, and the load-balancing (aux) loss of the latest training step.
 *
 * The counts come from Mixtral's per-forward `lastBlocks[l].expertCounts`. `trainBatch` runs one
 * forward per micro-batch, so the counter wraps the model's `forward` on this instance to read
 * them after each call; it counts only while {@link ExpertLoad.track} runs (evaluation forwards are
 * not training traffic). Summing over the data-parallel group is {@link ExpertLoad.allReduce}.
 */
import type { Communicator } from "../comm/communicator.ts";
import type { CausalDecoder, CausalLMInput, CausalLMOutput } from "../models/llama.ts";
import { MixtralForCausalLM } from "../models/mixtral.ts";

/** See the module comment. */
export class ExpertLoad {
  /** counts[layer][expert]: routing choices of this rank so far (u32 range is ample for a run). */
  readonly counts: Float64Array[];
  private tracking = false;
  private stepAux: number[] = [];
  /** Mean aux loss (before its coefficient) over the micro-batches of the latest tracked step on
   * this rank; null before the first step or for a model without aux loss. */
  lastStepAux: number | null = null;

  private constructor(private readonly model: MixtralForCausalLM) {
    const c = model.config;
    this.counts = Array.from({ length: c.num_hidden_layers }, () => new Float64Array(c.num_local_experts));
    const forward = model.forward.bind(model);
    model.forward = async (input: CausalLMInput): Promise<CausalLMOutput> => {
      const out = await forward(input);
      if (this.tracking) await this.record(out);
      return out;
    };
  }

  /** A counter attached to `model` when it is a Mixtral (sparse) model; null for dense models. */
  static attach(model: CausalDecoder): ExpertLoad | null {
    return model instanceof MixtralForCausalLM ? new ExpertLoad(model) : null;
  }

  private async record(out: CausalLMOutput): Promise<void> {
    const blocks = this.model.lastBlocks;
    for (let l = 0; l < blocks.length; l++) {
      const row = this.counts[l]!;
      const c = blocks[l]!.expertCounts;
      for (let e = 0; e < row.length; e++) row[e]! += c[e]!;
    }
    if (out.auxLoss) this.stepAux.push(await out.auxLoss.item());
  }

  /** Run one training step `fn` with counting on; afterwards {@link lastStepAux} is its aux loss. */
  async track<T>(fn: () => Promise<T>): Promise<T> {
    this.tracking = true;
    this.stepAux = [];
    try {
      return await fn();
    } finally {
      this.tracking = false;
      if (this.stepAux.length > 0) this.lastStepAux = this.stepAux.reduce((a, b) => a + b, 0) / this.stepAux.length;
    }
  }

  /**
   * Counts summed over all ranks of `comm`'s world (the dp group: every rank holds the router of
   * every layer and counts its own tokens) and the latest aux loss averaged over them. A
   * collective: every rank must call it. Returns plain arrays for a summary.
   */
  async allReduce(comm: Communicator): Promise<{ expertCounts: number[][]; auxLoss: number | null }> {
    const L = this.counts.length;
    const E = L > 0 ? this.counts[0]!.length : 0;
    const flat = new Float64Array(L * E + 2);
    for (let l = 0; l < L; l++) flat.set(this.counts[l]!, l * E);
    flat[L * E] = this.lastStepAux ?? 0;
    flat[L * E + 1] = this.lastStepAux === null ? 0 : 1;
    if (comm.worldSize > 1) await comm.allReduce(flat);
    const expertCounts = Array.from({ length: L }, (_, l) => Array.from(flat.subarray(l * E, (l + 1) * E)));
    const n = flat[L * E + 1]!;
    return { expertCounts, auxLoss: n > 0 ? flat[L * E]! / n : null };
  }
}
