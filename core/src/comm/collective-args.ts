/**
 * Argument checks and layouts every transport's collectives share (local and mpi: the same rules and
 * the same messages, whatever moves the bytes). Throws plain Errors naming the collective, the group
 * and what was expected (docs/comm.md).
 */
import type { CollectiveName, CommArray, CommReduceOp, ReduceOptions } from "./communicator.ts";

/** Typed-array constructor of a CommArray (`array.constructor`). */
export type ArrayCtor = {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): CommArray;
  new (length: number): CommArray;
  readonly BYTES_PER_ELEMENT: number;
  readonly name: string;
};

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

/** The reduction options with their defaults: op "sum", no average, Uint16Array as bf16. */
export function reduceSettings(opts: ReduceOptions | undefined): { op: CommReduceOp; average: boolean; half: "bf16" | "f16" } {
  return { op: opts?.op ?? "sum", average: opts?.average ?? false, half: opts?.half ?? "bf16" };
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

/** reduce_scatter's output: `output` checked (same type, length input length / n) or a new array.
 * The caller has checked that n divides the input length.
 * @throws on an output of another type or length. */
export function reduceScatterOutput<T extends CommArray>(input: T, output: T | undefined, n: number, groupName: string): T {
  const ctor = input.constructor as ArrayCtor;
  const s = input.length / n;
  const out = output ?? (new ctor(s) as T);
  if (out.constructor !== ctor) throw new Error(`reduce_scatter: output is ${out.constructor.name}, input is ${ctor.name}; they must match`);
  if (out.length !== s) throw new Error(`reduce_scatter on group ${groupName}: output length ${out.length}, expected input length / group size = ${s}`);
  return out;
}

/** gather's output: at the root `output` checked (same type, length n × input length) or a new
 * array; null on the other members (their `output` is ignored).
 * @throws at the root on an output of another type or length. */
export function gatherOutput<T extends CommArray>(input: T, output: T | undefined, n: number, isRoot: boolean, groupName: string): T | null {
  const ctor = input.constructor as ArrayCtor;
  const s = input.length;
  const out = isRoot ? (output ?? (new ctor(n * s) as T)) : null;
  if (out && out.constructor !== ctor) throw new Error(`gather: output is ${out.constructor.name}, input is ${ctor.name}; they must match`);
  if (out && out.length !== n * s) throw new Error(`gather on group ${groupName}: output length ${out.length}, expected ${n * s}`);
  return out;
}

/** scatter's root input, checked at the root (world rank `root`): present, same type as `output`,
 * n × output length. Other members' input is not looked at.
 * @throws at the root when the input is missing or of another type or length. */
export function checkScatterInput(input: CommArray | null, output: CommArray, n: number, isRoot: boolean, root: number, groupName: string): void {
  if (!isRoot) return;
  const ctor = output.constructor as ArrayCtor;
  const s = output.length;
  if (!input) throw new Error(`scatter on group ${groupName}: the root (rank ${root}) must pass an input array`);
  if (input.constructor !== ctor) throw new Error(`scatter: input is ${input.constructor.name}, output is ${ctor.name}; they must match`);
  if (input.length !== n * s) throw new Error(`scatter on group ${groupName}: root input length ${input.length}, expected group size × output length = ${n * s}`);
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
