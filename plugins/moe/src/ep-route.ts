/**
 * The expert-parallel route (design.md "route" hook; DeepSpeed MoE's all-to-all dispatcher,
 * Megatron-Core's `MoEAlltoAllTokenDispatcher`): the `ep_size` ranks of an EP group hold one full
 * set of experts between them, E/ep_size each (placement.ts); per MoE layer
 *
 *   permute   sort this rank's kept (token, slot) pairs by expert — the local route's plan order
 *   dispatch  one Int32 all_to_all_v of per-expert row counts, one f32 all_to_all_v of the rows
 *   experts   every local expert, ascending, runs once on its rows (ordered by source rank, then
 *             token); `runExpert(e, null)` for an expert that received none, so unit hooks (ZeRO-3
 *             gathers, gradient reduction) fire identically on every rank of its edp group
 *   combine   all_to_all_v of the outputs back, then out[t] += w·y in plan order
 *
 * Forward values equal the local route's exactly: every expert row is computed from the same
 * input row, and the combine adds the same products in the same order (experts ascending per
 * token). Expert *gradients* are summed over the rows of all sources in one matmul (then over the
 * edp group), so they differ from a single rank's micro-batch accumulation by f32 rounding only.
 */
import type { EngineEnv } from "@zeromoe/core";
import { gatherRows, reshape, sliceRows, concatRows } from "../../../core/src/tensor/index.ts";
import { fromArray, type Tensor } from "../../../core/src/tensor/tensor.ts";
import { permutePlan, type MoERoute, type RouteRequest } from "../../../core/src/nn/moe-route.ts";
import { combineRows, dispatchRows, exchangeLayout } from "./exchange.ts";
import type { LayerPlacement } from "./placement.ts";

/** Per-layer exchange figures of the last forward (for statistics and the benchmark). */
export interface ExchangeRecord {
  layer: number;
  /** Rows this rank sent to each EP rank (kept pairs). */
  sentRows: number[];
  /** Rows this rank's experts received from each EP rank. */
  receivedRows: number[];
}

/** The all_to_all_v route of one rank (see the module comment). */
export class ExpertParallelRoute implements MoERoute {
  readonly name = "expert_parallel";
  private readonly env: EngineEnv;
  private readonly placement: readonly LayerPlacement[];
  /** The last exchange of each layer (index = layer). */
  readonly lastExchange: ExchangeRecord[] = [];
  /** Rows sent to other ranks of the EP group since creation (forward dispatch only). */
  remoteRowsSent = 0;

  /** @param placement per-layer placement over the env's EP group. */
  constructor(env: EngineEnv, placement: readonly LayerPlacement[]) {
    this.env = env;
    this.placement = placement;
  }

  async run(req: RouteRequest): Promise<Tensor> {
    const { x, topkIndices, topkWeights, numExperts, topK, layer } = req;
    const T = x.shape[0]!;
    const H = x.shape[1]!;
    const be = x.be;
    const group = this.env.groups.ep;
    const pl = this.placement[layer];
    if (!pl) throw new Error(`moe route: no placement for layer ${layer} (placements for ${this.placement.length} layers)`);
    if (pl.owner.length !== numExperts) throw new Error(`moe route: layer ${layer} placement covers ${pl.owner.length} experts, the layer has ${numExperts}`);
    if (pl.local.length !== group.size) throw new Error(`moe route: placement is for ${pl.local.length} EP ranks, the EP group ${group.name} has ${group.size}`);
    const plan = permutePlan(topkIndices, numExperts, topK);
    const layout = await exchangeLayout(this.env.comm, group, plan, pl, H);
    this.lastExchange[layer] = { layer, sentRows: layout.sendRows, receivedRows: layout.recvRows };
    this.remoteRowsSent += layout.sendRows.reduce((a, r, j) => a + (j === group.rank ? 0 : r), 0);
    const ctx = { comm: this.env.comm, group, layout };
    const tokenIdx = fromArray(be, plan.tokenOf, [plan.tokenOf.length], "i32");
    const pairIdx = fromArray(be, plan.pairOf, [plan.pairOf.length], "i32");
    const xs = gatherRows(x, tokenIdx);
    const expertIn = await dispatchRows(ctx, xs);
    const outs: Tensor[] = [];
    let start = 0;
    for (let le = 0; le < layout.localExperts.length; le++) {
      const n = layout.expertRows[le]!;
      const y = await req.runExpert(layout.localExperts[le]!, n > 0 ? sliceRows(expertIn, start, n) : null);
      if (y) outs.push(y);
      start += n;
    }
    const expertOut = outs.length > 0 ? concatRows(outs) : null;
    const w = gatherRows(reshape(topkWeights, [topkWeights.numel, 1]), pairIdx);
    return combineRows(ctx, expertOut, expertIn, w, tokenIdx, T);
  }
}
