/**
 * The optimizer step over offloaded units (the offload hook's `step`), pipelined: while the host
 * AdamW threads update unit i, unit i+1's gradient is already on the host — copied during backward
 * as its reduction completed (grad-copy.ts) — or, without that, being copied device → host now
 * (and, for nvme, its states read from their files into the other staging slot). After unit i's update its
 * new parameters go back to the device — 16-bit bits with mixed precision, else the fp32 master —
 * into `paramStorage()` at the unit's optimizer range, and (nvme) its states are written back.
 */
import { DTYPE_BYTES, type Backend } from "@zeromoe/kernels";
import type { HookContext, OffloadStepInputs, UnitHandle } from "@zeromoe/core/plugin";
import type { HostAdamWPool } from "./adamw-pool.ts";
import { CpuOptimizerState } from "./cpu-state.ts";
import type { GradCopies } from "./grad-copy.ts";
import type { GradDtype } from "./host-adamw.ts";
import type { HostLedger } from "./host-ledger.ts";

/** Host arrays of one unit's states for one update: where AdamW reads and writes. */
export interface StateViews {
  master: Float32Array;
  m: Float32Array;
  v: Float32Array;
}

/** A states provider with a staging pipeline (nvme), or direct host arrays (cpu). */
export interface StagedStates {
  /** Begin making unit `u`'s states available (nvme: read into a staging slot). */
  acquire(u: UnitHandle): Promise<StateViews>;
  /** Unit `u`'s update is done: write back (nvme) and free its slot once durable-enough to reuse. */
  release(u: UnitHandle, views: StateViews): Promise<void>;
  /** How many units may be acquired at once (2 = double-buffered). */
  readonly depth: number;
}

/** Growing shared staging buffers for gradients and 16-bit parameters (two slots each). */
export class GradStaging {
  private bufs: (SharedArrayBuffer | null)[] = [null, null];
  private p16: (SharedArrayBuffer | null)[] = [null, null];
  constructor(private readonly ledger: HostLedger) {}
  private grow(which: (SharedArrayBuffer | null)[], slot: number, bytes: number): SharedArrayBuffer {
    const cur = which[slot];
    if (cur && cur.byteLength >= bytes) return cur;
    const next = new SharedArrayBuffer(Math.max(16, bytes));
    this.ledger.addHost("comm", next.byteLength - (cur?.byteLength ?? 0));
    which[slot] = next;
    return next;
  }
  grad(slot: number, dtype: GradDtype, n: number): Float32Array | Uint16Array {
    const bytes = n * DTYPE_BYTES[dtype];
    const sab = this.grow(this.bufs, slot, bytes);
    return dtype === "f32" ? new Float32Array(sab, 0, n) : new Uint16Array(sab, 0, n);
  }
  param16(slot: number, n: number): Uint16Array {
    return new Uint16Array(this.grow(this.p16, slot, n * 2), 0, n);
  }
  free(): void {
    for (const arr of [this.bufs, this.p16]) for (let i = 0; i < arr.length; i++) {
      if (arr[i]) this.ledger.addHost("comm", -arr[i]!.byteLength);
      arr[i] = null;
    }
  }
}

/** Direct host arrays of cpu-resident states. */
export const cpuStates: StagedStates = {
  depth: Number.POSITIVE_INFINITY,
  acquire: async (u) => {
    const h = u.hostOptimizerState();
    if (!(h instanceof CpuOptimizerState)) throw new Error(`offload: unit ${u.name} has no host-memory optimizer states`);
    return { master: h.master, m: h.m, v: h.v };
  },
  release: async () => {},
};

/** Copy unit `u`'s owned gradient device → host into staging slot `slot`. */
async function fetchGrad(be: Backend, u: UnitHandle, staging: GradStaging, slot: number, ledger: HostLedger): Promise<Float32Array | Uint16Array> {
  const { view, n } = u.ownedGrad();
  const dtype = u.dtype as GradDtype;
  const raw = await be.read(view, n);
  const out = staging.grad(slot, dtype, n);
  if (raw instanceof Float64Array) (out as Float32Array).set(raw);
  else (out as Float32Array | Uint16Array).set(raw as Float32Array & Uint16Array);
  ledger.moved.grad_d2h += n * DTYPE_BYTES[dtype];
  return out;
}

/**
 * Run AdamW on the host for `units` (all offloaded, optimCount > 0; see the module comment).
 * @throws when a unit's states are not host states of this plugin
 */
export async function offloadStep(
  units: readonly UnitHandle[], hp: OffloadStepInputs, ctx: HookContext,
  deps: { pool: HostAdamWPool; staging: GradStaging; ledger: HostLedger; states: (u: UnitHandle) => StagedStates; grads?: GradCopies },
): Promise<void> {
  const be = ctx.be;
  const mixed = ctx.paramDtype !== "f32";
  const prefetch = (i: number) => {
    const u = units[i]!;
    // the copy started when the unit's reduction completed in backward, else one now
    const grad = deps.grads?.take(u) ?? fetchGrad(be, u, deps.staging, i % 2, deps.ledger);
    return Promise.all([grad, deps.states(u).acquire(u)]);
  };
  let next = units.length > 0 ? prefetch(0) : null;
  const writes: Promise<void>[] = [];
  for (let i = 0; i < units.length; i++) {
    const u = units[i]!;
    const [grad, st] = await next!;
    // double-buffered: the next unit's gradient (and nvme states) while this one updates
    next = i + 1 < units.length ? prefetch(i + 1) : null;
    const n = u.optimCount;
    const p16 = mixed ? deps.staging.param16(i % 2, n) : null;
    await deps.pool.step(st.master, grad, u.dtype as GradDtype, st.m, st.v, p16, ctx.paramDtype === "f16" ? "f16" : "bf16", n, hp);
    const hostParams = u.hostParams();
    if (hostParams) {
      // parameter offload: the new shard stays on the host (a device copy, if any, is dropped first
      // after writing back what was written through it — nothing the step changed)
      await u.evictParams();
      await hostParams.write(u.optimStart - u.plan.shardStart, p16 ? p16.slice(0, n) : st.master.slice(0, n));
    } else {
      const stored = u.paramStorage();
      const off = u.optimStart - stored.start;
      if (p16) be.write({ buf: stored.buf, off }, p16.slice(0, n));
      else be.write({ buf: stored.buf, off }, st.master.slice(0, n));
      deps.ledger.moved.param_h2d += n * (mixed ? 2 : 4);
    }
    writes.push(deps.states(u).release(u, st));
  }
  await Promise.all(writes);
}
