/**
 * Arenas: who frees the tensors ops allocate.
 *
 * Every owned tensor is registered with the innermost arena when it is created. The root arena
 * belongs to the autograd tape and is emptied by `backward()` (or `resetTape()`). `noGrad(fn)` and
 * `scope(fn)` (in no-grad mode) push a child arena; when `fn` finishes, every tensor created inside is
 * freed except the ones `fn` returned (found in the returned value: a Tensor, an array, or a plain
 * object's own values, one level deep), which move to the parent arena. Tensors marked `retain()`
 * are never freed by an arena.
 *
 * Arenas follow the call stack of *one* logical computation at a time. With async functions, other
 * work interleaved at an `await` would be charged to the same arena; ZeroMoE runs one forward or
 * backward at a time per process, so this is not a problem in practice.
 */
import type { Tensor } from "./tensor.ts";

/** A list of tensors to free together. */
export class Arena {
  readonly tensors: Tensor[] = [];
  private pruneAt = 1024;

  /** Register a tensor. Drops already-freed entries now and then, so a long-lived arena (the root
   * one, when no backward ever empties it) does not keep growing on the host. */
  push(t: Tensor): void {
    this.tensors.push(t);
    if (this.tensors.length >= this.pruneAt) {
      let j = 0;
      for (const x of this.tensors) if (!x.isDisposed) this.tensors[j++] = x;
      this.tensors.length = j;
      this.pruneAt = Math.max(1024, 2 * j);
    }
  }

  /** Free every tensor of this arena except retained ones and those in `keep`. */
  release(keep: ReadonlySet<Tensor> = new Set()): void {
    for (const t of this.tensors) if (!keep.has(t)) t.disposeIfTemporary();
    this.tensors.length = 0;
  }
}

const root = new Arena();
const stack: Arena[] = [root];

/** The root arena (owned by the autograd tape). */
export function rootArena(): Arena {
  return root;
}

/** Register a newly created owned tensor with the innermost arena. */
export function trackTensor(t: Tensor): void {
  stack[stack.length - 1]!.push(t);
}

/** Make `arena` the innermost arena (pair with {@link popArena}). */
export function pushArena(arena: Arena): void {
  stack.push(arena);
}

/** Remove `arena` from the stack (wherever it is; arenas of interleaved async work may nest out
 * of order). Does not free anything. */
export function popArena(arena: Arena): void {
  const idx = stack.lastIndexOf(arena);
  if (idx > 0) stack.splice(idx, 1);
}

/** Run `fn` inside a fresh child arena; free what it created except its returned tensors, which are
 * handed to the parent arena. Works with sync and async `fn`. */
export function withArena<T>(fn: () => T): T {
  const arena = new Arena();
  stack.push(arena);
  const finish = (value: unknown): void => {
    const idx = stack.lastIndexOf(arena);
    if (idx >= 0) stack.splice(idx, 1);
    const keep = new Set(collectTensors(value));
    arena.release(keep);
    const parent = stack[stack.length - 1]!;
    for (const t of keep) parent.push(t);
  };
  let out: T;
  try {
    out = fn();
  } catch (e) {
    finish(undefined);
    throw e;
  }
  if (out instanceof Promise) {
    return out.then(
      (v) => {
        finish(v);
        return v;
      },
      (e) => {
        finish(undefined);
        throw e;
      },
    ) as T;
  }
  finish(out);
  return out;
}

/** Tensors found in a returned value: the value itself, array elements, or own property values of a
 * plain object (one level deep). View tensors contribute their base, which owns the memory. */
export function collectTensors(value: unknown): Tensor[] {
  const out: Tensor[] = [];
  const add = (v: unknown): void => {
    if (isTensor(v)) {
      let t: Tensor = v;
      while (t.base) t = t.base;
      out.push(t);
    }
  };
  if (Array.isArray(value)) value.forEach(add);
  else if (isTensor(value)) add(value);
  else if (value && typeof value === "object") {
    for (const v of Object.values(value as Record<string, unknown>)) {
      if (Array.isArray(v)) v.forEach(add);
      else add(v);
    }
  }
  return out;
}

function isTensor(v: unknown): v is Tensor {
  return !!v && typeof v === "object" && "numel" in v && "shape" in v && "be" in v && typeof (v as { dispose?: unknown }).dispose === "function";
}
