/**
 * The expert-parallel token dispatcher (the route hook, docs/architecture.md "The six hooks";
 * DeepSpeed MoE's all-to-all dispatcher, Megatron-Core's `MoEAlltoAllTokenDispatcher`): the
 * `ep_size` ranks of an EP group hold one full set of experts between them, E/ep_size each
 * (placement.ts). It is core's permutation skeleton (`PermutationDispatcher`, `@zeromoe/core/nn`:
 * permute by expert, exchange, experts, exchange back, weighted unpermute) with this exchange, per
 * MoE layer:
 *
 *   layout    one Int32 all_to_all_v of per-expert row counts (exchange.ts)
 *   dispatch  rows in send order → core's differentiable all_to_all_v (`allToAllVRows`) → rows in
 *             expert order: each local expert's rows by source rank, then token
 *   experts   the model's grouped experts run every local expert, ascending, once — also one that
 *             received no rows, so unit hooks (ZeRO-3 gathers, gradient reduction) fire identically
 *             on every rank of its edp group
 *   combine   expert outputs → receive order → the reverse all_to_all_v → plan order, then
 *             out[t] += w·y in plan order (the skeleton's unpermute)
 *
 * With expert tensor parallelism (etp group of more than one rank, expert-tp.ts) the expert-order
 * rows are all_gathered in the etp group before the experts (each rank holds one slice of them) and
 * the partial outputs reduce_scattered back before the combine.
 *
 * The reorderings are `gatherRows` by the layout's permutations (skipped when the identity); both
 * all_to_all_v nodes are collectives whose backward runs on every rank (tensor/tape.ts).
 * Forward values equal the local dispatcher's exactly: every expert row is computed from the same
 * input row, and the combine adds the same products in the same order (experts ascending per
 * token). Expert *gradients* are summed over the rows of all sources in one matmul (then over the
 * edp group), so they differ from a single rank's micro-batch accumulation by f32 rounding only.
 */
import { allToAllVRows, type Communicator, type Group } from "@zeromoe/core/comm";
import { PermutationDispatcher, type DispatchRequest, type Dispatched, type ExchangeResult, type PermuteCounts } from "@zeromoe/core/nn";
import { fromArray, gatherRows, type Tensor } from "@zeromoe/core/tensor";
import { exchangeLayout, type ExchangeLayout } from "./exchange.ts";
import { etpAllGather, etpReduceScatter, type ETPGathered } from "./expert-tp.ts";
import type { LayerPlacement } from "./placement.ts";

/** Per-layer exchange figures of the last forward (for statistics and the benchmark). */
export interface ExchangeRecord {
  layer: number;
  /** Rows this rank sent to each EP rank (kept pairs). */
  sentRows: number[];
  /** Rows this rank's experts received from each EP rank. */
  receivedRows: number[];
}

/** Where the dispatcher exchanges: the communicator and this rank's EP group. */
export interface EPGroupContext {
  comm: Communicator;
  /** The EP group (ep_size ranks holding one full set of experts, or of their etp slices). */
  ep: Group;
  /** The etp group (expert tensor parallelism, expert-tp.ts); absent or one rank: whole experts. */
  etp?: Group;
}

/** What the dispatcher keeps between exchange and exchangeBack. */
interface DispatchState {
  layout: ExchangeLayout;
  /** The etp all_gather's layout, or null without expert TP. */
  etp: ETPGathered | null;
}

/** The all_to_all_v dispatcher of one rank (see the module comment). */
export class ExpertParallelDispatcher extends PermutationDispatcher<DispatchState> {
  readonly name = "expert_parallel";
  private readonly comm: Communicator;
  private readonly group: Group;
  private readonly etp: Group | null;
  private readonly placement: readonly LayerPlacement[];
  /** The last exchange of each layer (index = layer). */
  readonly lastExchange: ExchangeRecord[] = [];
  /** Rows sent to other ranks of the EP group since creation (forward dispatch only). */
  remoteRowsSent = 0;

  /** @param placement per-layer placement over the EP group. */
  constructor(ctx: EPGroupContext, placement: readonly LayerPlacement[]) {
    super();
    this.comm = ctx.comm;
    this.group = ctx.ep;
    this.etp = ctx.etp && ctx.etp.size > 1 ? ctx.etp : null;
    this.placement = placement;
  }

  /** The all_to_all_v sizes need the per-expert counts on the host (one read per layer when the
   * router kept the choice on the device). */
  protected override readonly needsHostCounts = true;

  protected async exchange(xs: Tensor, counts: PermuteCounts | null, req: DispatchRequest): Promise<ExchangeResult<DispatchState>> {
    const plan = counts!;
    const { layer, numExperts } = req;
    const group = this.group;
    const pl = this.placement[layer];
    if (!pl) throw new Error(`moe dispatcher: no placement for layer ${layer} (placements for ${this.placement.length} layers)`);
    if (pl.owner.length !== numExperts) throw new Error(`moe dispatcher: layer ${layer} placement covers ${pl.owner.length} experts, the layer has ${numExperts}`);
    if (pl.local.length !== group.size) throw new Error(`moe dispatcher: placement is for ${pl.local.length} EP ranks, the EP group ${group.name} has ${group.size}`);
    const layout = await exchangeLayout(this.comm, group, plan, pl, xs.shape[1]!);
    this.lastExchange[layer] = { layer, sentRows: layout.sendRows, receivedRows: layout.recvRows };
    this.remoteRowsSent += layout.sendRows.reduce((a, r, j) => a + (j === group.rank ? 0 : r), 0);
    const send = layout.sendIsPlan ? xs : permuteRows(xs, layout.sendOrder);
    const recv = await allToAllVRows(send, { comm: this.comm, group, sendRows: layout.sendRows, recvRows: layout.recvRows });
    const rows = layout.recvIsExpertOrder ? recv : permuteRows(recv, layout.recvIndexOfExpertRow);
    if (!this.etp) return { rows, experts: layout.localExperts, tokensPerExpert: Int32Array.from(layout.expertRows), state: { layout, etp: null } };
    const g = await etpAllGather(rows, layout.expertRows, this.comm, this.etp);
    return { rows: g.rows, experts: layout.localExperts, tokensPerExpert: Int32Array.from(g.tokensPerExpert), state: { layout, etp: g } };
  }

  protected async exchangeBack(partialOutput: Tensor, st: DispatchState, _d: Dispatched): Promise<Tensor> {
    const layout = st.layout;
    const expertOutput = st.etp ? await etpReduceScatter(partialOutput, st.etp) : partialOutput;
    const back = layout.recvIsExpertOrder ? expertOutput : permuteRows(expertOutput, layout.expertRowOfRecvIndex);
    const got = await allToAllVRows(back, { comm: this.comm, group: this.group, sendRows: layout.recvRows, recvRows: layout.sendRows });
    return layout.sendIsPlan ? got : permuteRows(got, layout.planRowSendPos);
  }
}

/** out[i] = x[order[i]] (a row permutation on the device; its backward scatters the rows back). */
function permuteRows(x: Tensor, order: Int32Array): Tensor {
  return gatherRows(x, fromArray(x.be, order, [order.length], "i32"));
}
