/**
 * Tape-based reverse-mode autograd over device buffers (in the spirit of micrograd/tinygrad, but
 * every value is a backend buffer and every backward is a sequence of backend ops).
 *
 * Recording: each differentiable op calls {@link record} with its inputs, its output and a backward
 * closure. A node is recorded only when grad mode is on and some input `requiresGrad`. The model
 * also records **unit markers** ({@link markUnit}): `enter`/`leave` of a parameter unit's region of
 * the forward pass. The tape is a single global list per process (one forward/backward at a time).
 *
 * `backward(loss)` sweeps the tape in reverse:
 * - at a unit's `leave` marker (the first one met in reverse), `unit.enterBackward()` runs — the
 *   model wires this to the `gather(unit, "bwd")` hook;
 * - each op node with an incoming gradient runs its backward (which may be async, e.g. an
 *   all_to_all), adding into its inputs' gradients; parameter gradients are *added* into the unit's
 *   flat gradient buffer;
 * - at a unit's first `enter` marker (the last one met in reverse), all of that unit's gradients are
 *   complete and `unit.finishBackward()` runs (the `gradReady(unit)` hook, then `release`). Markers
 *   are recorded for every unit the forward entered, even one whose parameters received no tokens,
 *   so every rank fires the hooks in the same order (collectives stay matched).
 * - node outputs and gradients are freed as soon as the sweep no longer needs them; at the end every
 *   tensor of the tape's arena is freed (except `retain()`ed ones, e.g. a loss you want to read
 *   later — read it before `backward` or retain it) and the tape is cleared.
 *
 * `noGrad(fn)`: ops inside record nothing and their intermediates are freed when `fn` returns
 * (except the tensors it returns). `scope(fn)` does the same in no-grad mode and nothing in grad
 * mode (there the tape owns intermediates until backward) — models wrap each layer in a scope so
 * no-grad forward memory stays bounded by one layer.
 *
 * Activation checkpointing (`checkpoint.ts`) records one node per region; its backward recomputes
 * the region on a fresh tape ({@link recomputeBackward}) and runs a nested sweep over it.
 *
 * Limits: one tape per process — run forward then backward before the next forward (a second
 * forward before backward would be swept, and freed, by the same backward). Node backward closures
 * must read parameters through their tensors (`w.view` at backward time), never views captured in
 * forward, because a unit's buffer may be replaced in between.
 */
import type { Backend, View } from "@zeromoe/kernels";
import { Arena, popArena, pushArena, rootArena, withArena } from "./arena.ts";
import { Tensor, fmtShape } from "./tensor.ts";

/** What the tape needs from a parameter unit (implemented by `nn/unit.ts` `Unit`). */
export interface TapeUnit {
  readonly name: string;
  /** Backward is about to need this unit's parameters (fires `gather(unit, "bwd")`). */
  enterBackward(): void | Promise<void>;
  /** All gradients of this unit are complete (fires `gradReady(unit)`, then `release(unit, "bwd")`). */
  finishBackward(): void | Promise<void>;
}

/** A recorded op. `backward` receives the gradient of `out` (same shape, f32) and must add
 * contributions to its inputs with {@link accumulateGrad}/{@link gradTarget}. A node with
 * `extraOuts` (checkpointed regions) takes their gradients itself with {@link takeGrad}; it runs
 * when any of its outputs has a gradient (`gOut` is then zeros if `out` has none). */
export interface OpNode {
  kind: "op";
  name: string;
  inputs: Tensor[];
  out: Tensor;
  extraOuts?: Tensor[];
  /** A collective (e.g. the differentiable all_to_all_v, comm/all-to-all-v-rows.ts): its backward
   * runs in every sweep that meets it, with a zero `gOut` when `out` received no gradient on this
   * rank, because the other members of its group run their half of the backward collective. */
  collective?: boolean;
  backward: (gOut: Tensor) => void | Promise<void>;
}

/** A unit region boundary. */
export interface UnitMarker {
  kind: "enter" | "leave";
  unit: TapeUnit;
}

type Entry = OpNode | UnitMarker;

let gradEnabled = true;
/** The tape ops record onto (swapped for a fresh one while a checkpointed region recomputes). */
let entries: Entry[] = [];

/** State of one reverse sweep: gradients of non-parameter tensors, and incoming gradients that a
 * node handed to an input with {@link passGrad} (so they are not freed with the node). */
interface Sweep {
  grads: Map<Tensor, Tensor>;
  handedOver: Set<Tensor>;
}
let sweep: Sweep | null = null;

/** Whether ops currently record onto the tape. */
export function isGradEnabled(): boolean {
  return gradEnabled;
}

/** Number of entries (op nodes and unit markers) on the tape — for tests and debugging. */
export function tapeLength(): number {
  return entries.length;
}

/**
 * Run `fn` with gradient recording off; tensors created inside are freed when it finishes, except
 * the ones it returns (see `arena.ts`). Works with sync and async functions.
 */
export function noGrad<T>(fn: () => T): T {
  const prev = gradEnabled;
  gradEnabled = false;
  let out: T;
  try {
    out = withArena(fn);
  } catch (e) {
    gradEnabled = prev;
    throw e;
  }
  if (out instanceof Promise) {
    return out.finally(() => {
      gradEnabled = prev;
    }) as T;
  }
  gradEnabled = prev;
  return out;
}

/** In no-grad mode: run `fn` in a child arena (free its intermediates on return, keep what it
 * returns). In grad mode: just run `fn` (the tape owns intermediates until backward). */
export function scope<T>(fn: () => T): T {
  return gradEnabled ? fn() : withArena(fn);
}

/** Record an op: marks `out.requiresGrad` and appends a node when grad mode is on and any input
 * requires grad. Returns `out`. */
export function record(name: string, inputs: Tensor[], out: Tensor, backward: OpNode["backward"]): Tensor {
  if (!gradEnabled) return out;
  if (!inputs.some((t) => t.requiresGrad)) return out;
  out.requiresGrad = true;
  entries.push({ kind: "op", name, inputs, out, backward });
  return out;
}

/** Append a prepared node (grad mode only; used by `checkpoint`). */
export function recordNode(node: OpNode): void {
  if (!gradEnabled) return;
  node.out.requiresGrad = true;
  for (const t of node.extraOuts ?? []) t.requiresGrad = true;
  entries.push(node);
}

/** Record a unit boundary (no-op in no-grad mode). */
export function markUnit(kind: "enter" | "leave", unit: TapeUnit): void {
  if (!gradEnabled) return;
  entries.push({ kind, unit });
}

/** Drop the tape without running backward and free every tensor of the root arena (except
 * retained ones). Use after a forward in grad mode whose backward will not run. */
export function resetTape(): void {
  if (sweep) throw new Error("resetTape(): a backward sweep is running");
  entries = [];
  rootArena().release();
}

/**
 * Give the incoming gradient `g` of the node being processed to input `t` as its gradient, without
 * a copy (for ops whose local derivative is the identity: reshape, add). Only possible when `t` is
 * not a parameter, has no gradient yet, has g's element count, and `g` was not handed over already.
 * The caller must not write to `g` afterwards. Returns whether it happened.
 */
export function passGrad(t: Tensor, g: Tensor): boolean {
  if (!t.requiresGrad || t.param || !sweep || sweep.grads.has(t) || sweep.handedOver.has(g) || t.numel !== g.numel) return false;
  sweep.grads.set(t, g);
  sweep.handedOver.add(g);
  return true;
}

/** Remove and return the gradient accumulated so far for `t` in the running sweep (the caller
 * owns it and must dispose it), or null. For nodes with `extraOuts`. */
export function takeGrad(t: Tensor): Tensor | null {
  if (!sweep) throw new Error(`takeGrad(${t}): called outside backward()`);
  const g = sweep.grads.get(t) ?? null;
  if (g) sweep.grads.delete(t);
  return g;
}

/** Give `t` the gradient tensor `g` (owned by the caller until now): adopted without a copy when
 * `t` has none yet, else added in and freed. */
export function adoptGrad(t: Tensor, g: Tensor): void {
  if (!sweep) throw new Error(`adoptGrad(${t}): called outside backward()`);
  if (!t.requiresGrad) {
    g.dispose();
    return;
  }
  if (!t.param && !sweep.grads.has(t) && g.numel === t.numel) {
    sweep.grads.set(t, g);
    return;
  }
  accumulateGrad(
    t,
    (dst, acc) => {
      if (acc) t.be.axpy(1, g.view, dst, t.numel);
      else t.be.copy(g.view, dst, t.numel);
    },
    true,
  );
  g.dispose();
}

/** A place to write a gradient contribution; call `commit()` after writing. */
export interface GradTarget {
  view: View;
  commit(): void;
}

function gradBuffer(be: Backend, t: Tensor, contents: "zeros" | "any"): Tensor {
  const buf = be.alloc("f32", t.numel, "activation", contents);
  return new Tensor(be, t.shape, "f32", { buf, owns: true });
}

/**
 * Where an op's backward should write the gradient contribution for input `t`, given how the
 * backend op writes: `"add"` (it does `dst += …`) or `"overwrite"` (`dst = …`). Returns null when `t`
 * needs no gradient. For parameters the target is the unit's gradient accumulator; an overwrite
 * there goes through a temporary that `commit()` adds in and frees. `fullWrite` (overwrite only):
 * the op writes every one of t's elements, so a new buffer need not be zeroed first (tensor.ts
 * `uninit`); leave it false for an op that may skip elements (they must read as 0).
 */
export function gradTarget(t: Tensor, mode: "add" | "overwrite", fullWrite = false): GradTarget | null {
  if (!t.requiresGrad) return null;
  if (!sweep) throw new Error(`gradTarget(${t}): called outside backward()`);
  const grads = sweep.grads;
  const be = t.be;
  let dst: View;
  if (t.param) {
    dst = t.param.gradView();
  } else {
    const g = grads.get(t);
    if (!g) {
      const fresh = gradBuffer(be, t, mode === "overwrite" && fullWrite ? "any" : "zeros");
      grads.set(t, fresh);
      return { view: fresh.view, commit: () => {} };
    }
    dst = g.view;
  }
  if (mode === "add") return { view: dst, commit: () => {} };
  const tmp = be.alloc("f32", t.numel, "activation", fullWrite ? "any" : "zeros");
  return {
    view: { buf: tmp, off: 0 },
    commit: () => {
      be.axpy(1, { buf: tmp, off: 0 }, dst, t.numel);
      be.free(tmp);
    },
  };
}

/** Add a gradient contribution to `t`: `write(dst, accumulate)` writes it into `dst` (when
 * `accumulate`, it must add instead of overwrite; only requested when `canAccumulate`).
 * `fullWrite`: when not accumulating, `write` sets every element of dst (see {@link gradTarget}). */
export function accumulateGrad(t: Tensor, write: (dst: View, accumulate: boolean) => void, canAccumulate: boolean, fullWrite = false): void {
  if (!t.requiresGrad) return;
  if (canAccumulate) {
    // Decide between overwrite (fresh buffer) and add (existing accumulator) without a temporary.
    if (!t.param && sweep && !sweep.grads.has(t)) {
      const target = gradTarget(t, "overwrite", fullWrite)!;
      write(target.view, false);
      target.commit();
      return;
    }
    const target = gradTarget(t, "add")!;
    write(target.view, true);
    target.commit();
    return;
  }
  const target = gradTarget(t, "overwrite", fullWrite)!;
  write(target.view, false);
  target.commit();
}

/** A temporary f32 buffer of `n` elements for backward internals; call `free()` when done. */
export function scratch(be: Backend, n: number): { view: View; free(): void } {
  const buf = be.alloc("f32", Math.max(n, 1), "activation");
  return { view: { buf, off: 0 }, free: () => be.free(buf) };
}

/** Options of {@link backward}. */
export interface BackwardOptions {
  /** Gradient of `loss` (same shape); default: ones (then `loss` must have one element). */
  grad?: Tensor;
}

/**
 * Reverse sweep from `loss` over the whole tape (see the module comment), then free the tape.
 * @throws if `loss` does not require grad, or is not scalar and no `grad` is given.
 */
export async function backward(loss: Tensor, opts: BackwardOptions = {}): Promise<void> {
  if (sweep) throw new Error("backward(): already running (one backward at a time per process)");
  if (!loss.requiresGrad) throw new Error(`backward(): ${loss} does not require grad (was it computed under noGrad, or from no trainable parameter?)`);
  const be = loss.be;
  const list = entries;
  entries = [];
  try {
    let seed: Tensor;
    if (opts.grad) {
      if (opts.grad.numel !== loss.numel) throw new Error(`backward(): grad has shape ${fmtShape(opts.grad.shape)}, loss has ${fmtShape(loss.shape)}`);
      seed = gradBuffer(be, loss, "zeros");
      be.copy(opts.grad.view, seed.view, loss.numel);
    } else {
      if (loss.numel !== 1) throw new Error(`backward(): loss has shape ${fmtShape(loss.shape)}; pass opts.grad for a non-scalar loss`);
      seed = gradBuffer(be, loss, "zeros");
      be.fill(seed.view, 1, 1);
    }
    await sweepTape(list, new Map([[loss, seed]]), []);
  } finally {
    rootArena().release();
  }
}

/** The reverse sweep over `list` from `seeds` (tensor → its gradient, owned by the sweep). Returns
 * the gradients of the `capture` tensors (the caller owns them); frees every other gradient. */
async function sweepTape(list: Entry[], seeds: Map<Tensor, Tensor>, capture: Tensor[]): Promise<Map<Tensor, Tensor>> {
  const outer = sweep;
  const prevMode = gradEnabled;
  const s: Sweep = { grads: new Map(seeds), handedOver: new Set() };
  sweep = s;
  gradEnabled = false;
  const captured = new Map<Tensor, Tensor>();
  try {
    // The first `enter` marker of each unit (in forward order) closes its gradients in reverse.
    const firstEnter = new Map<TapeUnit, number>();
    for (let i = 0; i < list.length; i++) {
      const e = list[i]!;
      if (e.kind === "enter" && !firstEnter.has(e.unit)) firstEnter.set(e.unit, i);
    }
    const entered = new Set<TapeUnit>();
    for (let i = list.length - 1; i >= 0; i--) {
      const e = list[i]!;
      if (e.kind === "leave") {
        if (!entered.has(e.unit)) {
          entered.add(e.unit);
          await e.unit.enterBackward();
        }
        continue;
      }
      if (e.kind === "enter") {
        if (firstEnter.get(e.unit) === i) {
          if (!entered.has(e.unit)) {
            entered.add(e.unit);
            await e.unit.enterBackward();
          }
          await e.unit.finishBackward();
        }
        continue;
      }
      const node = e as OpNode;
      let g = s.grads.get(node.out);
      if (!g && (node.collective || node.extraOuts?.some((t) => s.grads.has(t)))) {
        g = gradBuffer(node.out.be, node.out, "zeros");
        s.grads.set(node.out, g);
      }
      if (g) {
        // Await only asynchronous backwards: a synchronous node adds no microtask turn, so the
        // turns between hook calls do not depend on how many ops a data-dependent graph holds
        // (an MoE expert with or without tokens). Background collectives (ZeRO-3 prefetch,
        // overlapped reduce_scatters) then advance at the same points on every rank.
        const pending = node.backward(g);
        if (pending) await pending;
        s.grads.delete(node.out);
        if (s.handedOver.has(g)) s.handedOver.delete(g);
        else g.dispose();
      }
      // Nothing later in the reverse sweep can read this node's output any more (views free
      // nothing here: their base is the output of an earlier node).
      node.out.disposeIfTemporary();
    }
    for (const c of capture) {
      const g = s.grads.get(c);
      if (g) {
        captured.set(c, g);
        s.grads.delete(c);
      }
    }
  } finally {
    sweep = outer;
    gradEnabled = prevMode;
    const keep = new Set(captured.values());
    for (const g of new Set(s.grads.values())) if (!keep.has(g)) g.dispose();
  }
  return captured;
}

/**
 * For activation checkpointing: run `fn` in grad mode on a fresh tape inside a fresh arena, then
 * sweep that tape backward from the gradients `seedsOf(outputs)` gives for its outputs, and return
 * the gradients of `capture` (tensors `fn` used as inputs; the caller owns them, null when none
 * flowed). Everything the recomputation allocated is freed; unit markers recorded during `fn` fire
 * their backward hooks during this inner sweep. The caller's tape and sweep are restored.
 */
export async function recomputeBackward(fn: () => Promise<Tensor[]>, seedsOf: (outs: Tensor[]) => Map<Tensor, Tensor>, capture: Tensor[]): Promise<(Tensor | null)[]> {
  const savedEntries = entries;
  const savedSweep = sweep;
  const savedMode = gradEnabled;
  entries = [];
  sweep = null;
  gradEnabled = true;
  const arena = new Arena();
  pushArena(arena);
  try {
    const outs = await fn();
    const seeds = seedsOf(outs);
    const list = entries;
    entries = [];
    sweep = savedSweep; // sweepTape saves and restores around its own sweep
    const got = await sweepTape(list, seeds, capture);
    return capture.map((c) => got.get(c) ?? null);
  } finally {
    popArena(arena);
    arena.release();
    entries = savedEntries;
    sweep = savedSweep;
    gradEnabled = savedMode;
  }
}

/** Run `fn` with grad mode set to `enabled` (restored afterwards, also for async `fn`). */
export async function withGradMode<T>(enabled: boolean, fn: () => Promise<T>): Promise<T> {
  const prev = gradEnabled;
  gradEnabled = enabled;
  try {
    return await fn();
  } finally {
    gradEnabled = prev;
  }
}
