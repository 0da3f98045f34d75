/**
 * The row layout of one expert-parallel MoE layer's token exchange (host side): which rows go to
 * which rank (dispatch: token rows to the ranks holding their experts; combine: expert outputs
 * back), in which order. The exchange itself is core's differentiable all_to_all_v
 * (`allToAllVRows`, `@zeromoe/core/comm`) between row permutations (`gatherRows`), in ep-route.ts.
 *
 * Layouts (P = ep_size, "plan order" = {@link permutePlan}'s order: by global expert, then token):
 * - send order (what this rank sends): for destination rank j = 0..P−1, for each expert e that j
 *   holds (ascending), e's rows in plan order. With `contiguous` placement this IS plan order.
 * - receive order (what all_to_all_v delivers): for source rank i = 0..P−1, for each local expert
 *   (ascending), the rows i sent for it (in i's token order).
 * - expert order (what the experts run on): for each local expert (ascending), for source rank
 *   i = 0..P−1, those rows — i.e. an expert's rows ordered by source rank then token, a fixed order.
 * Each reordering is a row permutation; the layout holds it and its inverse, and says when one is
 * the identity (then no gather is needed).
 */
import type { Communicator, Group } from "@zeromoe/core/comm";
import type { PermuteCounts } from "@zeromoe/core/nn";
import type { LayerPlacement } from "./placement.ts";
import { groupMajorLayout, inversePermutation as inverse } from "./group-major.ts";

/** The row layout of one layer's exchange on this rank (see the module comment). */
export interface ExchangeLayout {
  /** Rows of the hidden dimension. */
  hidden: number;
  /** sendOrder[q] = plan row sent at position q. */
  sendOrder: Int32Array;
  /** planRowSendPos[sendOrder[q]] = q (the inverse permutation). */
  planRowSendPos: Int32Array;
  /** Whether sendOrder is the identity (contiguous placement). */
  sendIsPlan: boolean;
  /** Rows sent to each EP rank. */
  sendRows: number[];
  /** Rows received from each EP rank. */
  recvRows: number[];
  /** recvIndexOfExpertRow[r] = receive-order row of expert-order row r. */
  recvIndexOfExpertRow: Int32Array;
  /** expertRowOfRecvIndex[recvIndexOfExpertRow[r]] = r (the inverse permutation). */
  expertRowOfRecvIndex: Int32Array;
  /** Whether recvIndexOfExpertRow is the identity (one local expert, or one rank). */
  recvIsExpertOrder: boolean;
  /** Rows each local expert (ascending) received in total. */
  expertRows: number[];
  /** The local experts (global indices, ascending). */
  localExperts: number[];
}

/**
 * Build the layout: exchanges the per-expert counts with one small all_to_all_v (Int32) in the EP
 * group, so every rank learns how many rows it receives for each of its experts from each source.
 * Every member of `group` must call it (same layer, same order).
 */
export async function exchangeLayout(comm: Communicator, group: Group, plan: PermuteCounts, placement: LayerPlacement, hidden: number): Promise<ExchangeLayout> {
  const P = group.size;
  const me = group.rank;
  const local = placement.local;
  const nl = local[me]!.length;
  // counts addressed to each destination, for the destination's local experts in ascending order
  const sendCounts = new Int32Array(P * nl);
  const sendOrder = new Int32Array(plan.kept);
  const sendRows: number[] = [];
  let q = 0;
  let identity = true;
  for (let j = 0; j < P; j++) {
    if (local[j]!.length !== nl) throw new Error(`moe exchange: EP rank ${j} holds ${local[j]!.length} experts, rank ${me} holds ${nl}; placements must give every rank E/ep_size experts`);
    let rows = 0;
    local[j]!.forEach((e, le) => {
      const c = plan.counts[e]!;
      sendCounts[j * nl + le] = c;
      for (let r = 0; r < c; r++) {
        const src = plan.starts[e]! + r;
        if (src !== q) identity = false;
        sendOrder[q++] = src;
      }
      rows += c;
    });
    sendRows.push(rows);
  }
  const counts = P === 1 ? sendCounts : await comm.allToAllV(sendCounts, new Array(P).fill(nl), new Array(P).fill(nl), undefined, { group });
  // counts[i·nl + le] = rows source i sends for my local expert le
  const { sourceRows: recvRows, order: recvIndexOfExpertRow, groupRows: expertRows } = groupMajorLayout(counts, P, nl);
  return {
    hidden,
    sendOrder,
    planRowSendPos: inverse(sendOrder),
    sendIsPlan: identity,
    sendRows,
    recvRows,
    recvIndexOfExpertRow,
    expertRowOfRecvIndex: inverse(recvIndexOfExpertRow),
    recvIsExpertOrder: recvIndexOfExpertRow.every((v, i) => v === i),
    expertRows,
    localExperts: [...local[me]!],
  };
}

