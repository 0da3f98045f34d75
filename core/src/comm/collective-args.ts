/**
 * Argument checks and layouts every transport's collectives share (local and mpi: the same rules and
 * the same messages, whatever moves the bytes). Throws plain Errors naming the collective, the group
 * and what was expected (docs/comm.md).
 */
import type { CollectiveName, CommArray, ReduceOptions } from "./communicator.ts";

/** Typed-array constructor of a CommArray. */
export type ArrayCtor = { new (n: number): CommArray };

/** Index of world rank `root` in group `g`.
 * @throws when `root` is not a member of the group. */
export function rootIndex(g: { readonly name: string; readonly ranks: readonly number[] }, root: number, op: CollectiveName): number {
  const idx = g.ranks.indexOf(root);
  if (idx < 0) throw new Error(`${op}: root ${root} is not a member of group ${g.name} [${g.ranks.join(",")}]`);
  return idx;
}

/** The reduction options as the call header's flag bits: 1 max, 2 average, 4 f16-packed halves. */
export function reduceFlags(opts: ReduceOptions | undefined): number {
  return (opts?.op === "max" ? 1 : 0) | (opts?.average ? 2 : 0) | (opts?.half === "f16" ? 4 : 0);
}

/** @throws on an unknown op, average with max, or average of integer data. */
export function validateReduce(data: CommArray, opts: ReduceOptions | undefined, op: CollectiveName): void {
  if (opts?.op !== undefined && opts.op !== "sum" && opts.op !== "max") throw new Error(`${op}: op must be "sum" or "max", got "${opts.op}"`);
  if (opts?.average && opts.op === "max") throw new Error(`${op}: average is only defined with op "sum"`);
  if (opts?.average && (data instanceof Int32Array || data instanceof Uint32Array)) {
    throw new Error(`${op}: average is not defined for ${data.constructor.name} (integer) data`);
  }
}

/** Exclusive prefix sums: [0, c0, c0+c1, …] (length counts.length + 1). */
export function prefix(counts: readonly number[]): number[] {
  const p = [0];
  for (const c of counts) p.push(p[p.length - 1]! + c);
  return p;
}

/** True when the two views share any byte. */
export function sharesBytes(a: ArrayBufferView, b: ArrayBufferView): boolean {
  if (a.buffer !== b.buffer || a.byteLength === 0 || b.byteLength === 0) return false;
  return a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;
}

/** all_gather's output: `output` checked (same type, length n × input length) or a new array. */
export function allGatherOutput<T extends CommArray>(input: T, output: T | undefined, n: number, groupName: string): T {
  const ctor = input.constructor as ArrayCtor;
  const s = input.length;
  const out = output ?? (new ctor(n * s) as T);
  if (out.constructor !== ctor) throw new Error(`all_gather: output is ${out.constructor.name}, input is ${ctor.name}; they must match`);
  if (out.length !== n * s) throw new Error(`all_gather on group ${groupName}: output length ${out.length}, expected group size × input length = ${n * s}`);
  return out;
}

/** all_to_all_v's checked layout: displacements of both sides and the receive array (`recv`, or a
 * new one of Σ recvCounts elements). `where` names the call in messages.
 * @throws on counts of the wrong length or not non-negative integers, counts past `send`/`recv`,
 *   or a `recv` of another type. */
export function allToAllVLayout<T extends CommArray>(send: T, sendCounts: readonly number[], recvCounts: readonly number[], recv: T | undefined, n: number, where: string): { out: T; sdispl: number[]; rdispl: number[] } {
  const ctor = send.constructor as ArrayCtor;
  for (const [name, counts] of [["sendCounts", sendCounts], ["recvCounts", recvCounts]] as const) {
    if (counts.length !== n) throw new Error(`${where}: ${name} has ${counts.length} entries, expected the group size ${n}`);
    for (const c of counts) if (!Number.isInteger(c) || c < 0) throw new Error(`${where}: ${name} must hold non-negative integers, got ${c}`);
  }
  const sdispl = prefix(sendCounts);
  const rdispl = prefix(recvCounts);
  if (sdispl[n]! > send.length) throw new Error(`${where}: sendCounts sum to ${sdispl[n]} but send has ${send.length} elements`);
  const out = recv ?? (new ctor(rdispl[n]!) as T);
  if (out.constructor !== ctor) throw new Error(`${where}: recv is ${out.constructor.name}, send is ${ctor.name}; they must match`);
  if (out.length < rdispl[n]!) throw new Error(`${where}: recvCounts sum to ${rdispl[n]} but recv has ${out.length} elements`);
  return { out, sdispl, rdispl };
}
