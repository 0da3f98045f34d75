/**
 * all_to_all_v as a differentiable tensor op (the autograd-aware form of
 * `Communicator.allToAllV`; Megatron-Core's `tensor_parallel.all_to_all`, PyTorch's
 * `all_to_all_single` with autograd): rows of a tensor travel in blocks between the members of a
 * group, and the backward sends the gradient rows back the reverse way.
 *
 *   forward   member i sends its rows [Σ_{j<m} sendRows[j], +sendRows[m]) to member m; the output
 *             holds, for source member i = 0..P−1 in order, the recvRows[i] rows i sent here
 *   backward  the reverse all_to_all_v: gradient rows of the output go back to their sources
 *             (recvRows → sendRows), and are added into x's gradient
 *
 * Every member of the group must call it with matching counts (member m's recvRows[i] = member i's
 * sendRows[m]) and in the same order as the group's other collectives. Because the backward is a
 * collective too, the tape node is recorded in grad mode whether or not `x` requires a gradient, and
 * is marked `collective` (tensor/tape.ts): its backward runs on every rank, with a zero gradient
 * where the output received none (a rank whose experts got no rows). Rows travel through the host
 * as f32; the backend read is awaited also when this rank sends nothing, so every rank runs the
 * same sequence of awaits (ZeRO's background collectives advance between them).
 */
import type { Backend, HostArray, View } from "@zeromoe/kernels";
import { accumulateGrad, recordNode } from "../tensor/tape.ts";
import { Tensor, empty, fmtShape, fromArray, numelOf } from "../tensor/tensor.ts";
import type { Communicator, Group } from "./communicator.ts";

/** The counts of one row exchange (in rows; a row is everything after axis 0). */
export interface RowExchange {
  comm: Communicator;
  group: Group;
  /** Rows this rank sends to each member, in member order; Σ = the input's rows. */
  sendRows: readonly number[];
  /** Rows this rank receives from each member, in member order; Σ = the output's rows. */
  recvRows: readonly number[];
}

/**
 * Differentiable all_to_all_v of row blocks (see the module comment).
 * @param x f32 [n, ...rest] with n = Σ sendRows.
 * @returns f32 [Σ recvRows, ...rest].
 * @throws on a non-f32 or scalar input, counts whose length is not the group size, negative counts,
 *   or Σ sendRows ≠ n; the communicator's errors (mismatched counts, timeouts) pass through.
 */
export async function allToAllVRows(x: Tensor, ex: RowExchange): Promise<Tensor> {
  const { comm, group, sendRows, recvRows } = ex;
  if (x.dtype !== "f32" || x.ndim === 0) throw new Error(`allToAllVRows: x must be f32 with rank ≥ 1, got ${x}`);
  const P = group.size;
  if (sendRows.length !== P || recvRows.length !== P) {
    throw new Error(`allToAllVRows: sendRows (${sendRows.length}) and recvRows (${recvRows.length}) must have one count per member of group ${group.name} (${P})`);
  }
  for (const c of [...sendRows, ...recvRows]) if (!Number.isInteger(c) || c < 0) throw new Error(`allToAllVRows: row counts must be integers ≥ 0, got ${c}`);
  const n = x.shape[0]!;
  const sent = sendRows.reduce((a, b) => a + b, 0);
  if (sent !== n) throw new Error(`allToAllVRows: sendRows sum to ${sent}, x ${fmtShape(x.shape)} has ${n} rows`);
  const tail = x.shape.slice(1);
  const h = numelOf(tail);
  const R = recvRows.reduce((a, b) => a + b, 0);
  const be = x.be;
  const send = await readRows(be, x.view, n * h);
  const recv = P === 1 ? send : await comm.allToAllV(send, elems(sendRows, h), elems(recvRows, h), undefined, { group });
  if (recv.length !== R * h) throw new Error(`allToAllVRows: received ${recv.length} elements, expected ${R}·${h}`);
  const out = upload(be, recv, [R, ...tail]);
  recordNode({
    kind: "op",
    name: "all_to_all_v",
    inputs: [x],
    out,
    collective: true,
    backward: async (g) => {
      const gh = await readRows(be, g.view, R * h);
      const back = P === 1 ? gh : await comm.allToAllV(gh, elems(recvRows, h), elems(sendRows, h), undefined, { group });
      if (n === 0 || h === 0 || !x.requiresGrad) return;
      const tmp = upload(be, back, [n, ...tail]);
      accumulateGrad(x, (dst, acc) => (acc ? be.axpy(1, tmp.view, dst, n * h) : be.copy(tmp.view, dst, n * h)), true);
      tmp.dispose();
    },
  });
  return out;
}

/** Read `n` f32 elements at `v` as a Float32Array (a cpu backend in f64 mode is narrowed, so every
 * rank hands the collective the same array type). Awaited also for n = 0 (module comment). */
async function readRows(be: Backend, v: View, n: number): Promise<Float32Array> {
  const a: HostArray = await be.read(v, n);
  return a instanceof Float32Array ? a : Float32Array.from(a as ArrayLike<number>);
}

function elems(rows: readonly number[], h: number): number[] {
  return rows.map((r) => r * h);
}

function upload(be: Backend, data: Float32Array, shape: number[]): Tensor {
  return numelOf(shape) === 0 ? empty(be, shape) : fromArray(be, data, shape, "f32");
}
