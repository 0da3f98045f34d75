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
 * The per-expert arithmetic is the dense MLP's (models/llama.ts `swiglu`), computed for all listed
 * experts at once as one op (grouped-swiglu.ts): each projection is one grouped matmul over the
 * experts' row groups (offsets on the device), the activation one fused silu·mul, recomputed in
 * the backward; the gate and up projections are kept for it in the experts' dtype.
 */
import { empty, fromArray, type Tensor } from "../../tensor/tensor.ts";
import { groupedSwiGLU } from "./grouped-swiglu.ts";
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
   * rows [R, hidden] f32, grouped: experts[i] owns rows [offsets[i], offsets[i+1]).
   * Returns [R, hidden], row r = its expert's output for input row r (rows past the last group:
   * zeros). Each projection of all listed experts is ONE grouped matmul (grouped-swiglu.ts):
   * h = w1·x, u = w3·x, y = w2·(silu(h) ⊙ u) over the groups — no per-expert loop on the device.
   * Every expert of `experts` (global indices, strictly ascending) is entered before the products
   * and left after them, in ascending order (all listed experts are resident together, as in
   * Megatron-Core's GroupedMLP).
   * @param tokensPerExpert rows of each listed expert when the host knows them (checked to sum to
   *   R; used for {@link expertRouting} and to skip gradients of experts without rows), or null.
   * @param offsets i32 [experts.length + 1] group offsets on the device; absent = built (uploaded)
   *   from `tokensPerExpert`.
   * @throws on mismatched lengths, row counts that do not sum to R, experts not strictly
   *   ascending within [0, E), or neither counts nor offsets.
   */
  async forward(rows: Tensor, tokensPerExpert: ArrayLike<number> | null, experts: readonly number[], offsets?: Tensor): Promise<Tensor> {
    const R = rows.shape[0]!;
    const H = rows.shape[1]!;
    const G = experts.length;
    if (tokensPerExpert && G !== tokensPerExpert.length) throw new Error(`experts of layer ${this.layer}: ${G} experts, ${tokensPerExpert.length} row counts`);
    for (let i = 0; i < G; i++) {
      const e = experts[i]!;
      if (!Number.isInteger(e) || e < 0 || e >= this.experts.length || (i > 0 && e <= experts[i - 1]!)) {
        throw new Error(`experts of layer ${this.layer}: expert list [${experts.join(", ")}] must be strictly ascending within [0, ${this.experts.length})`);
      }
    }
    let hostOffsets: Int32Array | null = null;
    if (tokensPerExpert) {
      hostOffsets = new Int32Array(G + 1);
      for (let i = 0; i < G; i++) hostOffsets[i + 1] = hostOffsets[i]! + tokensPerExpert[i]!;
      if (hostOffsets[G] !== R) throw new Error(`experts of layer ${this.layer}: tokens_per_expert sum to ${hostOffsets[G]}, rows has ${R}`);
    }
    if (!offsets && !hostOffsets) throw new Error(`experts of layer ${this.layer}: neither row counts nor device offsets given`);
    if (offsets && (offsets.dtype !== "i32" || offsets.numel !== G + 1)) throw new Error(`experts of layer ${this.layer}: offsets must be i32 [${G + 1}], got ${offsets}`);
    if (G === 0) return empty(rows.be, [R, H]);
    const off = offsets ?? fromArray(rows.be, hostOffsets!, [G + 1], "i32");
    const listed = experts.map((e) => this.experts[e]!);
    // the routing the experts' gather hooks may read (expertRouting): row counts from the host
    // when known, else read from the device offsets on demand (one read, only when a hook asks)
    const names = listed.map((ex) => ex.unit.name);
    let known: Map<string, number> | null = null;
    if (tokensPerExpert) {
      known = new Map<string, number>();
      for (let i = 0; i < G; i++) known.set(names[i]!, tokensPerExpert[i]!);
    }
    const readRows = async (): Promise<ReadonlyMap<string, number>> => {
      if (known) return known;
      const o = await rows.be.read(off.view, G + 1);
      const m = new Map<string, number>();
      for (let i = 0; i < G; i++) m.set(names[i]!, Number(o[i + 1]) - Number(o[i]));
      known = m;
      return m;
    };
    const routing: ExpertRouting = { id: ++routingId, experts: names, rows: known, readRows };
    for (const name of names) currentRouting.set(name, routing);
    try {
      for (const ex of listed) await enterUnit(ex.unit);
      const y = R > 0 ? groupedExpertsSwiGLU(rows, listed, off, tokensPerExpert) : empty(rows.be, [0, H]);
      for (const ex of listed) await leaveUnit(ex.unit);
      return y;
    } finally {
      for (const name of names) if (currentRouting.get(name) === routing) currentRouting.delete(name);
    }
  }
}

/** The rows this rank routed to each expert of one {@link GroupedExperts.forward} call. */
export interface ExpertRouting {
  /** Distinct per forward call on this thread (increasing). */
  readonly id: number;
  /** Unit names (`layers.{l}.experts.{e}`) of the listed experts, ascending. */
  readonly experts: readonly string[];
  /** Unit name → rows routed to it on this rank, for every listed expert, ascending — when the host
   * knows the counts, else null (the dispatcher kept them on the device): use {@link readRows}. */
  readonly rows: ReadonlyMap<string, number> | null;
  /** The same map, read from the device group offsets when the host does not have it (one device
   * read, at most once per forward call). */
  readRows(): Promise<ReadonlyMap<string, number>>;
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

/** All listed experts on their row groups, x [R, hidden] → [R, hidden]: w2(silu(w1 x) ⊙ w3 x) as
 * one op (grouped-swiglu.ts: each projection one grouped matmul, the activation recomputed in the
 * backward), keeping the gate and up projections in the experts' dtype — bf16/f16 in a 16-bit job,
 * f32 otherwise. */
function groupedExpertsSwiGLU(x: Tensor, listed: readonly ExpertParams[], offsets: Tensor, rowsPerGroup: ArrayLike<number> | null): Tensor {
  const w = { w1: listed.map((e) => e.w1.tensor), w2: listed.map((e) => e.w2.tensor), w3: listed.map((e) => e.w3.tensor) };
  return groupedSwiGLU(x, w, offsets, rowsPerGroup, listed[0]!.unit.dtype);
}
