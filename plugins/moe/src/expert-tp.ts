/**
 * Expert tensor parallelism (Megatron-Core's `expert_tensor_parallel_size`; DeepSpeed's MoE has no
 * such key): each expert's SwiGLU weights are split over the T = etp_size ranks of an etp group the
 * way Megatron-Core's expert TP splits them —
 *
 *   w1 (gate) [I, H] and w3 (up) [I, H]: by rows (the output features: "columns" of the column-parallel
 *                                         linear), slice j = rows [j·I/T, (j+1)·I/T)
 *   w2 (down) [H, I]:                    by columns (the input features: row-parallel linear),
 *                                         slice j = columns [j·I/T, (j+1)·I/T)
 *
 * so etp rank j computes y_j = w2_j (silu(w1_j x) ⊙ w3_j x) — the part of the down projection's sum
 * over the intermediate dimension that falls in its slice — and y = Σ_j y_j (SwiGLU is elementwise
 * in the intermediate dimension, so the split is exact up to the order of that sum).
 *
 * Token flow (chosen here: all_gather in the etp group, as Megatron-Core's `AllGather`/`ReduceScatter`
 * around its expert TP): each rank receives from its EP dispatch only ITS tokens; before the expert
 * compute the etp group all_gathers them (every member gets every member's rows of the experts they
 * share), each member computes its intermediate slice on all of them, and a reduce_scatter sums the
 * T partial outputs and hands each member back the rows it contributed. Both are built on core's
 * differentiable all_to_all_v (`allToAllVRows`), so their backwards are the mirror collectives
 * (all_gather's backward sums the T gradient copies of a row; reduce_scatter's backward sends each
 * member the gradient of its rows). Partial outputs are summed in etp rank order 0..T−1 on every
 * member (deterministic, the same on every rank).
 *
 * Communication per MoE layer and rank j (n_i = rows member i received from its dispatch, H hidden,
 * 4 bytes per f32 element): forward all_gather sends (T−1)·n_j·H and receives Σ_{i≠j} n_i·H
 * elements; the forward reduce_scatter sends Σ_{i≠j} n_i·H and receives (T−1)·n_j·H; the backward
 * repeats both volumes once. Plus one Int32 all_to_all_v of the T·E_local row counts per layer. With
 * balanced routing (n_i = n) that is 4·(T−1)·n·H elements per layer and step (forward + backward) —
 * the same as Megatron-Core's AllGather + ReduceScatter expert-TP dispatcher.
 *
 * Groups (world W = edp · P · T, P = ep_size, T = etp_size; etp innermost as in Megatron-Core's
 * `tp-ep-dp` expert order): a block of P·T consecutive ranks holds one replica of all experts;
 * - etp group: T consecutive ranks [b·T, …, b·T + T − 1] (the T slices of the same experts);
 * - ep group: the P ranks of a block with the same etp index j (stride T): one slice j of every expert;
 * - edp group: the W/(P·T) ranks with the same position in their block (stride P·T): the replicas of
 *   one slice, over which ZeRO partitions and reduces it.
 * Example W=4, P=2, T=2: etp [0,1], [2,3]; ep [0,2], [1,3]; edp [0], [1], [2], [3].
 *
 * Memory (see {@link etpModelStateBytes}): a rank holds X_e = Ψ_e/(P·T) expert elements (E/P experts
 * of the layer, a 1/T slice of each), partitioned over its edp group of N_e = W/(P·T) ranks.
 *
 * In the engine (`moe.etp_size`): core builds the groups (core/src/comm/groups.ts
 * `expertTensorParallelRanks`) and the sliced expert units (core/src/nn/moe/expert-slice.ts); the
 * dispatcher (ep-route.ts) calls {@link etpAllGather} / {@link etpReduceScatter} around the experts;
 * memory.ts's layout uses the formula below (docs/moe.md "Expert tensor parallelism").
 */
import { allToAllVRows, expertTensorParallelRanks, type Communicator, type Group } from "@zeromoe/core/comm";
import { add, fromArray, gatherRows, sliceRows, type Tensor } from "@zeromoe/core/tensor";
import { moeModelStateBytes, type MoEMemoryBreakdown, type MoEMemoryInputs } from "./memory.ts";
import { groupMajorLayout, inversePermutation } from "./group-major.ts";

/** The job key this module's errors name. */
export const ETP_KEY = "moe.etp_size";

/** What {@link checkExpertTensorParallel} checks. */
export interface ExpertTPShape {
  worldSize: number;
  /** ep_size (P). */
  epSize: number;
  /** etp_size (T). */
  etpSize: number;
  /** Each expert's intermediate (SwiGLU hidden) width I. */
  intermediate: number;
}

/**
 * The problems of an ep × etp layout, as messages naming `moe.etp_size` (empty when valid):
 * etp_size a positive integer, world_size divisible by ep_size × etp_size, the expert's
 * intermediate size divisible by etp_size.
 */
export function checkExpertTensorParallel(s: ExpertTPShape): string[] {
  const { worldSize: W, epSize: P, etpSize: T, intermediate: I } = s;
  const out: string[] = [];
  if (!Number.isInteger(T) || T < 1) return [`${ETP_KEY}: expected a positive integer, got ${JSON.stringify(T)}`];
  if (!Number.isInteger(P) || P < 1) return [`moe.ep_size: expected a positive integer, got ${JSON.stringify(P)}`];
  if (!Number.isInteger(W) || W % (P * T) !== 0) out.push(`${ETP_KEY}: world_size ${W} is not divisible by ep_size × etp_size = ${P} × ${T} = ${P * T}`);
  if (!Number.isInteger(I) || I % T !== 0) out.push(`${ETP_KEY}: the expert's intermediate size ${I} is not divisible by etp_size ${T} (each etp rank holds I/etp_size of w1/w3's rows and w2's columns)`);
  return out;
}

/** {@link checkExpertTensorParallel}, throwing its first message. */
export function assertExpertTensorParallel(s: ExpertTPShape): void {
  const e = checkExpertTensorParallel(s);
  if (e.length > 0) throw new Error(e.join("; "));
}

/** The three expert groups of one rank (world ranks, ascending). */
export interface ExpertTPRanks {
  etp: number[];
  ep: number[];
  edp: number[];
}

/**
 * The etp, ep and edp groups of `rank` (module comment: etp innermost, then ep, then edp) — the
 * engine's layout (core/src/comm/groups.ts `expertTensorParallelRanks`), with errors naming moe.etp_size.
 * @throws when the layout is invalid (world_size % (ep_size·etp_size) ≠ 0) or rank ∉ [0, W).
 */
export function expertTPRanks(rank: number, worldSize: number, epSize: number, etpSize: number): ExpertTPRanks {
  const bad = checkExpertTensorParallel({ worldSize, epSize, etpSize, intermediate: etpSize });
  if (bad.length > 0) throw new Error(bad.join("; "));
  return expertTensorParallelRanks(rank, worldSize, epSize, etpSize);
}

/** This rank's position: etp index j (which slice), ep index i (which experts). */
export function expertTPCoords(rank: number, epSize: number, etpSize: number): { etpRank: number; epRank: number } {
  return { etpRank: rank % etpSize, epRank: Math.floor(rank / etpSize) % epSize };
}

/** The intermediate rows [lo, hi) that etp rank j holds of an expert of width I (I % T == 0). */
export function expertSliceRange(intermediate: number, etpSize: number, etpRank: number): [number, number] {
  if (intermediate % etpSize !== 0) throw new Error(`${ETP_KEY}: the expert's intermediate size ${intermediate} is not divisible by etp_size ${etpSize}`);
  if (!Number.isInteger(etpRank) || etpRank < 0 || etpRank >= etpSize) throw new Error(`expert TP: etp rank ${etpRank} out of range [0, ${etpSize})`);
  const w = intermediate / etpSize;
  return [etpRank * w, (etpRank + 1) * w];
}

/** One expert's SwiGLU weights on the host, row-major f32: w1, w3 [I, H], w2 [H, I]. */
export interface HostExpertWeights {
  w1: Float32Array;
  w2: Float32Array;
  w3: Float32Array;
}

/**
 * Etp rank j's slice of a full expert (module comment): w1, w3 rows [lo, hi) → [I/T, H]; w2
 * columns [lo, hi) → [H, I/T].
 * @throws on lengths that are not I·H, or I % T ≠ 0.
 */
export function sliceExpert(full: HostExpertWeights, intermediate: number, hidden: number, etpSize: number, etpRank: number): HostExpertWeights {
  const I = intermediate;
  const H = hidden;
  for (const [k, v] of Object.entries(full)) if ((v as Float32Array).length !== I * H) throw new Error(`sliceExpert: ${k} has ${(v as Float32Array).length} elements, expected I·H = ${I}·${H}`);
  const [lo, hi] = expertSliceRange(I, etpSize, etpRank);
  const w = hi - lo;
  const w2 = new Float32Array(H * w);
  for (let h = 0; h < H; h++) w2.set(full.w2.subarray(h * I + lo, h * I + hi), h * w);
  return { w1: full.w1.slice(lo * H, hi * H), w2, w3: full.w3.slice(lo * H, hi * H) };
}

/**
 * The full expert from its T slices in etp order (the inverse of {@link sliceExpert}; also for
 * gradients, which are sliced the same way).
 * @throws when the slices do not all have I/T·H elements.
 */
export function gatherExpertSlices(slices: readonly HostExpertWeights[], intermediate: number, hidden: number): HostExpertWeights {
  const T = slices.length;
  const I = intermediate;
  const H = hidden;
  if (T === 0 || I % T !== 0) throw new Error(`gatherExpertSlices: ${T} slices for intermediate size ${I}`);
  const w = I / T;
  const out: HostExpertWeights = { w1: new Float32Array(I * H), w2: new Float32Array(H * I), w3: new Float32Array(I * H) };
  slices.forEach((s, j) => {
    for (const [k, v] of Object.entries(s)) if ((v as Float32Array).length !== w * H) throw new Error(`gatherExpertSlices: slice ${j}'s ${k} has ${(v as Float32Array).length} elements, expected ${w}·${H}`);
    out.w1.set(s.w1, j * w * H);
    out.w3.set(s.w3, j * w * H);
    for (let h = 0; h < H; h++) out.w2.set(s.w2.subarray(h * w, (h + 1) * w), h * I + j * w);
  });
  return out;
}

/** Inputs of {@link etpModelStateBytes}: {@link MoEMemoryInputs} plus etp_size. */
export interface ETPMemoryInputs extends MoEMemoryInputs {
  /** etp_size (T). */
  etpSize: number;
}

/**
 * Per-rank model-state bytes with expert TP (no padding): the memory.ts formula with the expert
 * part X_e = Ψ_e/(P·T) partitioned over N_e = N/(P·T) ranks — per stage (a, g, o bytes per element
 * as in memory.ts): stage 0 (a+g+o)·X_e; 1 (a+g)·X_e + o·X_e/N_e; 2 a·X_e + (g+o)·X_e/N_e;
 * 3 (a+g+o)·X_e/N_e. Dense parameters are unchanged (data parallel over N).
 * @throws when world_size % (ep_size·etp_size) ≠ 0 or the stage is not 0–3.
 */
export function etpModelStateBytes(inp: ETPMemoryInputs): MoEMemoryBreakdown {
  const { etpSize: T, epSize: P, worldSize: N } = inp;
  if (!Number.isInteger(T) || T < 1 || N % (P * T) !== 0) throw new Error(`${ETP_KEY}: world_size ${N} is not divisible by ep_size × etp_size = ${P} × ${T}`);
  // an ep × etp block of P·T ranks holds one replica of the experts, P·T-th each
  return moeModelStateBytes({ ...inp, epSize: P * T });
}

/** What {@link etpAllGather} returns for {@link etpReduceScatter}. */
export interface ETPGathered {
  /** Rows of all etp members, expert-major: for each local expert, member 0's rows, member 1's, …. */
  rows: Tensor;
  /** Rows of each local expert over all members (Σ = rows.shape[0]). */
  tokensPerExpert: number[];
  /** Rows each member contributed. */
  memberRows: number[];
  /** gatheredOrder[q] = receive-order row (members ascending, then their expert-major rows) at expert-major position q. */
  gatheredOrder: Int32Array;
  /** The inverse of gatheredOrder. */
  receiveOrder: Int32Array;
  comm: Communicator;
  group: Group;
}

/**
 * The etp all_gather before the expert compute (module comment). `rows` [n, H] f32 hold this
 * member's rows grouped by its local experts (expert-major, `tokensPerExpert` rows each); every
 * member of `group` (the etp group) must call it with the same number of local experts. Returns
 * every member's rows of those experts, expert-major, and the layout for {@link etpReduceScatter}.
 * Differentiable: the backward sums each row's T gradient copies into `rows`' gradient.
 * @throws when the counts do not sum to n; the communicator's errors pass through.
 */
export async function etpAllGather(rows: Tensor, tokensPerExpert: readonly number[], comm: Communicator, group: Group): Promise<ETPGathered> {
  const T = group.size;
  const n = rows.shape[0]!;
  const G = tokensPerExpert.length;
  const mine = tokensPerExpert.reduce((a, b) => a + b, 0);
  if (mine !== n) throw new Error(`expert TP all_gather: tokens per expert sum to ${mine}, rows has ${n}`);
  const sendCounts = new Int32Array(T * G);
  for (let m = 0; m < T; m++) for (let g = 0; g < G; g++) sendCounts[m * G + g] = tokensPerExpert[g]!;
  const counts = T === 1 ? sendCounts : await comm.allToAllV(sendCounts, new Array(T).fill(G), new Array(T).fill(G), undefined, { group });
  // counts[i·G + g] = rows member i holds of local expert g
  const { sourceRows: memberRows, order: gatheredOrder, groupRows: tokens } = groupMajorLayout(counts, T, G);
  const tot = gatheredOrder.length;
  // every member gets all of this member's rows: T copies of them, one block per destination
  const rep = new Int32Array(T * n);
  for (let m = 0; m < T; m++) for (let r = 0; r < n; r++) rep[m * n + r] = r;
  const send = T === 1 ? rows : gatherRows(rows, fromArray(rows.be, rep, [T * n], "i32"));
  const recv = T === 1 ? rows : await allToAllVRows(send, { comm, group, sendRows: new Array(T).fill(n), recvRows: memberRows });
  const receiveOrder = inversePermutation(gatheredOrder);
  const identity = gatheredOrder.every((v, p) => v === p);
  const out = identity ? recv : gatherRows(recv, fromArray(rows.be, gatheredOrder, [tot], "i32"));
  return { rows: out, tokensPerExpert: tokens, memberRows, gatheredOrder, receiveOrder, comm, group };
}

/**
 * The etp reduce_scatter after the expert compute: `partial` [Σ rows, H] f32 holds this member's
 * partial outputs (its intermediate slice) for the gathered rows, in {@link etpAllGather}'s
 * expert-major order; returns [n, H], this member's own rows (its all_gather input order) with the
 * T members' partials summed in member order 0..T−1. Differentiable (the backward sends each
 * member the gradient of its rows). Every member of the group must call it.
 * @throws when `partial` does not have the gathered row count.
 */
export async function etpReduceScatter(partial: Tensor, g: ETPGathered): Promise<Tensor> {
  const T = g.group.size;
  const tot = g.gatheredOrder.length;
  if (partial.shape[0] !== tot) throw new Error(`expert TP reduce_scatter: partial outputs have ${partial.shape[0]} rows, the all_gather delivered ${tot}`);
  if (T === 1) return partial;
  const identity = g.gatheredOrder.every((v, p) => v === p);
  const byMember = identity ? partial : gatherRows(partial, fromArray(partial.be, g.receiveOrder, [tot], "i32"));
  const me = g.group.rank;
  const n = g.memberRows[me]!;
  const got = await allToAllVRows(byMember, { comm: g.comm, group: g.group, sendRows: g.memberRows, recvRows: new Array(T).fill(n) });
  let sum = sliceRows(got, 0, n);
  for (let i = 1; i < T; i++) sum = add(sum, sliceRows(got, i * n, n));
  return sum;
}

/**
 * An expert compute under expert TP: all_gather the rows in the etp group, run `compute` (this
 * member's weight slices on every gathered row, grouped by local expert: `tokensPerExpert` rows
 * each) and reduce_scatter the partial outputs back. `rows` [n, H] f32, expert-major with
 * `tokensPerExpert` rows per local expert; returns [n, H], row r = Σ_j (member j's slice of row r's
 * expert)(row r) — the full expert's output up to the order of the intermediate sum.
 */
export async function etpExpertForward(rows: Tensor, tokensPerExpert: readonly number[], comm: Communicator, etpGroup: Group, compute: (rows: Tensor, tokensPerExpert: readonly number[]) => Promise<Tensor>): Promise<Tensor> {
  const g = await etpAllGather(rows, tokensPerExpert, comm, etpGroup);
  const partial = await compute(g.rows, g.tokensPerExpert);
  return etpReduceScatter(partial, g);
}
