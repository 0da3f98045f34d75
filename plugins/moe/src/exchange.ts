/**
 * The token exchange of one expert-parallel MoE layer: the host-side layout of the two
 * all_to_all_v calls (dispatch: token rows to the ranks holding their experts; combine: expert
 * outputs back), and the two differentiable tape nodes that run them.
 *
 * Layouts (P = ep_size, "plan order" = {@link permutePlan}'s order: by global expert, then token):
 * - send order (what this rank sends): for destination rank j = 0..P−1, for each expert e that j
 *   holds (ascending), e's rows in plan order. With `contiguous` placement this IS plan order.
 * - receive order (what all_to_all_v delivers): for source rank i = 0..P−1, for each local expert
 *   (ascending), the rows i sent for it (in i's token order).
 * - expert order (what the experts run on): for each local expert (ascending), for source rank
 *   i = 0..P−1, those rows — i.e. an expert's rows ordered by source rank then token, a fixed order.
 * All reorderings are row permutations done on the host buffers that the all_to_all_v needs anyway.
 *
 * Autograd (core/src/tensor/tape.ts): the dispatch node's backward runs the reverse all_to_all_v
 * of the input gradients, the combine node's backward the forward-direction one of the output
 * gradients. Every rank must run both collectives of every layer in backward too, even a rank
 * whose experts received no rows, so both nodes are recorded unconditionally in grad mode, the
 * combine node's output is the layer's [T, hidden] output (it always receives a gradient) and its
 * backward seeds a zero gradient for the dispatch node's output (so that node always runs).
 */
import type { Backend, HostArray, View } from "@zeromoe/kernels";
import type { Communicator, Group } from "@zeromoe/core";
import { accumulateGrad, adoptGrad, recordNode, scratch } from "../../../core/src/tensor/tape.ts";
import { Tensor, empty, fromArray } from "../../../core/src/tensor/tensor.ts";
import type { PermutePlan } from "../../../core/src/nn/moe-route.ts";
import type { LayerPlacement } from "./placement.ts";

type Rows = Float32Array;

/** The row layout of one layer's exchange on this rank (see the module comment). */
export interface ExchangeLayout {
  /** Rows of the hidden dimension. */
  hidden: number;
  /** sendOrder[q] = plan row sent at position q. */
  sendOrder: Int32Array;
  /** Whether sendOrder is the identity (contiguous placement). */
  sendIsPlan: boolean;
  /** Rows sent to each EP rank. */
  sendRows: number[];
  /** Rows received from each EP rank. */
  recvRows: number[];
  /** recvIndexOfExpertRow[r] = receive-order row of expert-order row r. */
  recvIndexOfExpertRow: Int32Array;
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
export async function exchangeLayout(comm: Communicator, group: Group, plan: PermutePlan, placement: LayerPlacement, hidden: number): Promise<ExchangeLayout> {
  const P = group.size;
  const me = group.rank;
  const local = placement.local;
  const nl = local[me]!.length;
  // counts addressed to each destination, for the destination's local experts in ascending order
  const sendCounts = new Int32Array(P * nl);
  const sendOrder = new Int32Array(plan.pairOf.length);
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
  const recvRows: number[] = [];
  const recvStart: number[] = [];
  let tot = 0;
  for (let i = 0; i < P; i++) {
    recvStart.push(tot);
    let rows = 0;
    for (let le = 0; le < nl; le++) rows += counts[i * nl + le]!;
    recvRows.push(rows);
    tot += rows;
  }
  const recvIndexOfExpertRow = new Int32Array(tot);
  const expertRows: number[] = [];
  let r = 0;
  for (let le = 0; le < nl; le++) {
    let n = 0;
    for (let i = 0; i < P; i++) {
      let off = recvStart[i]!;
      for (let l2 = 0; l2 < le; l2++) off += counts[i * nl + l2]!;
      const c = counts[i * nl + le]!;
      for (let t = 0; t < c; t++) recvIndexOfExpertRow[r++] = off + t;
      n += c;
    }
    expertRows.push(n);
  }
  return { hidden, sendOrder, sendIsPlan: identity, sendRows, recvRows, recvIndexOfExpertRow, expertRows, localExperts: [...local[me]!] };
}

/** dst[i] = src[idx[i]] row-wise (rows of `h`). */
function gatherHost(src: Rows, idx: Int32Array, h: number, out: Rows): Rows {
  for (let i = 0; i < idx.length; i++) out.set(src.subarray(idx[i]! * h, idx[i]! * h + h), i * h);
  return out;
}

/** dst[idx[i]] = src[i] row-wise. */
function scatterHost(src: Rows, idx: Int32Array, h: number, out: Rows): Rows {
  for (let i = 0; i < idx.length; i++) out.set(src.subarray(i * h, i * h + h), idx[i]! * h);
  return out;
}

function like(_a: Rows, n: number): Rows {
  return new Float32Array(n);
}

/**
 * Read n f32 elements at `v` as a Float32Array (the exchange always travels as f32, so every rank
 * passes the same array type to the collective; a cpu backend in f64 mode is narrowed here).
 * It always awaits the backend's read, also for n = 0: every rank must run the same sequence of
 * awaits, because ZeRO's background collectives (prefetch all_gathers, overlapped reduce_scatters)
 * advance between them and must be issued at the same points on every rank.
 */
async function readRows(be: Backend, v: View, n: number): Promise<Rows> {
  const a: HostArray = await be.read(v, n);
  return a instanceof Float32Array ? a : Float32Array.from(a as Float64Array);
}

function elems(rows: readonly number[], h: number): number[] {
  return rows.map((r) => r * h);
}

/** Upload host rows as a new [rows, h] f32 tensor. */
function upload(be: Backend, data: Rows, rows: number, h: number): Tensor {
  if (rows === 0) return empty(be, [0, h]);
  return fromArray(be, data, [rows, h], "f32");
}

/** Context shared by the two nodes of one layer. */
export interface ExchangeContext {
  comm: Communicator;
  group: Group;
  layout: ExchangeLayout;
}

/**
 * Dispatch: `xs` [n, hidden] (this rank's kept (token, slot) rows in plan order) → the rows this
 * rank's experts receive, in expert order, [R, hidden]. Backward: reverse all_to_all_v.
 */
export async function dispatchRows(ctx: ExchangeContext, xs: Tensor): Promise<Tensor> {
  const { comm, group, layout: L } = ctx;
  const h = L.hidden;
  const be = xs.be;
  const n = L.sendOrder.length;
  const host = await readRows(be, xs.view, n * h);
  const send = L.sendIsPlan ? host : gatherHost(host, L.sendOrder, h, like(host, n * h));
  const R = L.recvIndexOfExpertRow.length;
  const recv = group.size === 1 ? send : await comm.allToAllV(send, elems(L.sendRows, h), elems(L.recvRows, h), undefined, { group });
  const expertIn = upload(be, gatherHost(recv, L.recvIndexOfExpertRow, h, like(recv, R * h)), R, h);
  recordNode({
    kind: "op",
    name: "moe_dispatch_all_to_all_v",
    inputs: [xs],
    out: expertIn,
    backward: async (g) => {
      const gh = await readRows(be, g.view, R * h);
      const recvG = scatterHost(gh, L.recvIndexOfExpertRow, h, like(gh, R * h));
      const sendG = group.size === 1 ? recvG : await comm.allToAllV(recvG, elems(L.recvRows, h), elems(L.sendRows, h), undefined, { group });
      const planG = L.sendIsPlan ? sendG : scatterHost(sendG, L.sendOrder, h, like(sendG, n * h));
      if (n === 0 || !xs.requiresGrad) return;
      const tmp = upload(be, planG, n, h);
      accumulateGrad(xs, (dst, acc) => (acc ? be.axpy(1, tmp.view, dst, n * h) : be.copy(tmp.view, dst, n * h)), true);
      tmp.dispose();
    },
  });
  return expertIn;
}

/**
 * Combine: the local experts' outputs `expertOut` [R, hidden] in expert order (null when R = 0)
 * travel back to their source ranks; there row i of the plan is added to token `tokenIdx[i]` with
 * weight `w[i]` — `out[tokenIdx[i]] += w[i]·y[i]`, i ascending per token, exactly the
 * `scatterAddRows` of the local route — giving the layer's output [T, hidden].
 * `expertIn` is the dispatch node's output (its gradient is seeded with zeros in backward).
 */
export async function combineRows(ctx: ExchangeContext, expertOut: Tensor | null, expertIn: Tensor, w: Tensor, tokenIdx: Tensor, T: number): Promise<Tensor> {
  const { comm, group, layout: L } = ctx;
  const h = L.hidden;
  const be = w.be;
  const n = L.sendOrder.length;
  const R = L.recvIndexOfExpertRow.length;
  if (expertOut && expertOut.numel !== R * h) throw new Error(`moe combine: expert outputs have ${expertOut.numel / h} rows, ${R} were received`);
  const eo = await readRows(be, (expertOut ?? empty(be, [0, h])).view, R * h);
  const back = scatterHost(eo, L.recvIndexOfExpertRow, h, like(eo, R * h));
  const got = group.size === 1 ? back : await comm.allToAllV(back, elems(L.recvRows, h), elems(L.sendRows, h), undefined, { group });
  const ysHost = L.sendIsPlan ? got : scatterHost(got, L.sendOrder, h, like(got, n * h));
  const ys = upload(be, ysHost, n, h);
  const out = empty(be, [T, h]);
  if (n > 0) be.scatterAddRows(ys.view, tokenIdx.view, w.view, out.view, n, h);
  recordNode({
    kind: "op",
    name: "moe_combine_all_to_all_v",
    inputs: expertOut ? [expertOut, w] : [w],
    out,
    backward: async (g) => {
      // the dispatch node must run its collective even if no expert here produced a gradient
      adoptGrad(expertIn, empty(be, [R, h]));
      const gRows = scratch(be, n * h);
      const dx = scratch(be, n * h);
      if (n > 0) {
        be.gatherRows(g.view, tokenIdx.view, gRows.view, n, h);
        if (w.requiresGrad) {
          accumulateGrad(
            w,
            (dst) => {
              const prod = scratch(be, n * h);
              be.binary("mul", gRows.view, [n, h], ys.view, [n, h], prod.view);
              be.reduce("sum", prod.view, dst, n, h, 1);
              prod.free();
            },
            false,
          );
        }
        be.binary("mul", gRows.view, [n, h], w.view, [n, 1], dx.view);
      }
      const dys = await readRows(be, dx.view, n * h); // awaited also when n = 0 (see readRows)
      dx.free();
      gRows.free();
      const send = L.sendIsPlan ? dys : gatherHost(dys, L.sendOrder, h, like(dys, n * h));
      const recv = group.size === 1 ? send : await comm.allToAllV(send, elems(L.sendRows, h), elems(L.recvRows, h), undefined, { group });
      if (!expertOut || R === 0 || !expertOut.requiresGrad) return;
      const eg = upload(be, gatherHost(recv, L.recvIndexOfExpertRow, h, like(recv, R * h)), R, h);
      accumulateGrad(expertOut, (dst, acc) => (acc ? be.axpy(1, eg.view, dst, R * h) : be.copy(eg.view, dst, R * h)), true);
      eg.dispose();
    },
  });
  return out;
}
