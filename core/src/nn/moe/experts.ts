/**
 * The experts of one MoE layer as one module (Megatron-Core's `GroupedMLP` / `SequentialMLP`,
 * torchtitan's `GroupedExperts`): `forward(rows, tokensPerExpert, experts)` computes every listed
 * expert on its contiguous block of rows, as the dispatcher grouped them. Each expert is a SwiGLU
 * feed-forward (Mixtral `MixtralBlockSparseTop2MLP`): y = w2(silu(w1 x) ⊙ w3 x), w1/w3 [I, hidden],
 * w2 [hidden, I].
 *
 * Expert e's parameters form a unit (`layers.{l}.experts.{e}`): the module enters it before using
 * them and leaves it after (the gather/release hooks — ZeRO-3 all_gathers an expert's parameters
 * within its edp group), and enters every listed expert in ascending order, also one with no rows,
 * so the hooks fire in the same order on every rank of that expert's edp group whatever the routing.
 * The per-expert arithmetic is the dense MLP's (models/llama.ts `swiglu`): three `linear`s.
 */
import { concatRows, linear, mul, silu, sliceRows } from "../../tensor/index.ts";
import { empty, type Tensor } from "../../tensor/tensor.ts";
import { enterUnit, leaveUnit, type Parameter, type Unit } from "../unit.ts";

/** One SwiGLU expert's unit and parameters. */
export interface ExpertParams {
  unit: Unit;
  /** Gate projection [I, hidden]. */
  w1: Parameter;
  /** Down projection [hidden, I]. */
  w2: Parameter;
  /** Up projection [I, hidden]. */
  w3: Parameter;
}

/** All E experts of one layer (see the module comment). */
export class GroupedExperts {
  readonly layer: number;
  private readonly experts: readonly ExpertParams[];

  /** @param experts the layer's experts by global index (all E; those another rank holds are
   * never listed by this rank's dispatcher). */
  constructor(layer: number, experts: readonly ExpertParams[]) {
    this.layer = layer;
    this.experts = experts;
  }

  /** Number of experts in the layer (E). */
  get numExperts(): number {
    return this.experts.length;
  }

  /** The units of the layer's experts, in expert order. */
  units(): Unit[] {
    return this.experts.map((x) => x.unit);
  }

  /**
   * rows [R, hidden] f32, grouped: experts[i] owns rows [Σ_{j<i} tokensPerExpert[j], +tokensPerExpert[i]).
   * Returns [R, hidden], row r = its expert's output for input row r. Every expert of `experts`
   * (global indices, strictly ascending) is entered and left once, in order.
   * @throws on mismatched lengths, row counts that do not sum to R, or experts not strictly
   *   ascending within [0, E).
   */
  async forward(rows: Tensor, tokensPerExpert: ArrayLike<number>, experts: readonly number[]): Promise<Tensor> {
    const R = rows.shape[0]!;
    const H = rows.shape[1]!;
    if (experts.length !== tokensPerExpert.length) throw new Error(`experts of layer ${this.layer}: ${experts.length} experts, ${tokensPerExpert.length} row counts`);
    let total = 0;
    for (let i = 0; i < experts.length; i++) {
      const e = experts[i]!;
      if (!Number.isInteger(e) || e < 0 || e >= this.experts.length || (i > 0 && e <= experts[i - 1]!)) {
        throw new Error(`experts of layer ${this.layer}: expert list [${experts.join(", ")}] must be strictly ascending within [0, ${this.experts.length})`);
      }
      total += tokensPerExpert[i]!;
    }
    if (total !== R) throw new Error(`experts of layer ${this.layer}: tokens_per_expert sum to ${total}, rows has ${R}`);
    const outs: Tensor[] = [];
    let start = 0;
    const routed = new Map<string, number>();
    for (let i = 0; i < experts.length; i++) routed.set(this.experts[experts[i]!]!.unit.name, tokensPerExpert[i]!);
    const routing: ExpertRouting = { id: ++routingId, rows: routed };
    for (const name of routed.keys()) currentRouting.set(name, routing);
    try {
      for (let i = 0; i < experts.length; i++) {
        const ex = this.experts[experts[i]!]!;
        const n = tokensPerExpert[i]!;
        const xs = n > 0 ? sliceRows(rows, start, n) : null;
        await enterUnit(ex.unit);
        if (xs) outs.push(expertMLP(xs, ex));
        await leaveUnit(ex.unit);
        start += n;
      }
    } finally {
      for (const name of routed.keys()) if (currentRouting.get(name) === routing) currentRouting.delete(name);
    }
    return outs.length > 0 ? concatRows(outs) : empty(rows.be, [0, H]);
  }
}

/** The rows this rank routed to each expert of one {@link GroupedExperts.forward} call. */
export interface ExpertRouting {
  /** Distinct per forward call on this thread (increasing). */
  readonly id: number;
  /** Unit name (`layers.{l}.experts.{e}`) → rows routed to it on this rank, for every listed expert, ascending. */
  readonly rows: ReadonlyMap<string, number>;
}

let routingId = 0;
const currentRouting = new Map<string, ExpertRouting>();

/**
 * The routing of the GroupedExperts forward now running that lists expert unit `unitName` (this
 * thread — one rank), or undefined outside such a forward. Set before the first expert is entered
 * and cleared after the last is left, so a gather/release hook of an expert unit can read how many
 * rows this rank routed to it and to the layer's other listed experts (the offload plugin skips
 * fetching experts no rank of their edp group routed tokens to; docs/offload.md).
 */
export function expertRouting(unitName: string): ExpertRouting | undefined {
  return currentRouting.get(unitName);
}

/** One expert on its rows xs [n, hidden] → [n, hidden]: w2(silu(w1 x) ⊙ w3 x). */
function expertMLP(xs: Tensor, ex: ExpertParams): Tensor {
  return linear(mul(silu(linear(xs, ex.w1.tensor)), linear(xs, ex.w3.tensor)), ex.w2.tensor);
}
