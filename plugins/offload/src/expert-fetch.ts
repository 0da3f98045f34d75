/**
 * Gathering of the expert units the MoE-aware parameter offload may skip (gather-window.ts): an f32
 * expert whose parameter shard is offloaded is gathered here, not by ZeRO-3, so that ZeRO-3 only
 * ever sees the units every rank gathers in the same order (its recorded trace, prefetch and reuse
 * then stay valid on every rank), while an expert no rank of its edp group routed tokens to is
 * neither copied host → device, nor all_gathered, nor prefetched.
 *
 * A fetch copies the unit's host shard to the device (`prefetchParams`), all_gathers it over the
 * unit's group (edp) exactly as ZeRO-3 does (core's `readPadded` of shardSize elements, the
 * communicator's all_gather, the first numel elements written to a `gathered` buffer; a device copy
 * when the group has one rank), then frees the device shard. The values are the ones ZeRO-3 would
 * have gathered, so the result is bit-identical. Fetches are awaited where they are decided, in
 * program order: every rank of an edp group decides the same fetches in the same order (the same
 * routing decision, the same expert order), so the all_gathers match.
 *
 * A skipped (idle) expert still has to be resident for the layer's grouped matmuls, which take every
 * listed expert's weights as one group list (core/src/nn/moe/experts.ts) and compute nothing for a
 * group of zero rows: it gets a zero-filled placeholder, one per expert size shared by all idle
 * experts and reused every step (freed at the end of the step), never copied from the host nor
 * gathered. Its values reach no output and no gradient (no rows), so results are unchanged.
 */
import { DTYPE_BYTES, type Buf } from "@zeromoe/kernels";
import { readPadded, type HookContext, type UnitHandle } from "@zeromoe/core/plugin";
import type { HostLedger } from "./host-ledger.ts";

/** Gathered expert buffers of this rank (see the module comment). */
export class ExpertFetcher {
  private readonly resident = new Map<UnitHandle, Buf>();
  /** Zero-filled stand-ins for idle experts, by dtype and element count. */
  private readonly placeholders = new Map<string, Buf>();
  /** Expert fetches made (demand and prefetch). */
  fetches = 0;
  constructor(private readonly ledger: HostLedger) {}

  /** Whether `u` is gathered now. */
  has(u: UnitHandle): boolean {
    return this.resident.has(u);
  }

  /** Gather `u` (no-op when gathered); counts the shard's bytes in `ledger.moved.param_h2d`. */
  async fetch(u: UnitHandle, ctx: HookContext): Promise<void> {
    if (this.resident.has(u)) return;
    const p = u.plan;
    if (!u.paramsResident()) {
      u.prefetchParams();
      this.ledger.moved.param_h2d += p.shardSize * DTYPE_BYTES[u.dtype];
    }
    const stored = u.paramStorage().buf;
    const buf = ctx.be.alloc(u.dtype, Math.max(1, u.numel), "gathered");
    if (p.group.size === 1) {
      if (u.numel > 0) ctx.be.copy({ buf: stored, off: 0 }, { buf, off: 0 }, u.numel);
    } else {
      const shard = await readPadded(ctx.be, stored, 0, p.shardSize, p.shardSize);
      const full = await ctx.comm.allGather(shard, undefined, { group: p.group });
      if (u.numel > 0) ctx.be.write({ buf, off: 0 }, full.subarray(0, u.numel));
    }
    this.resident.set(u, buf);
    this.fetches++;
    await u.evictParams(); // clean (prefetched): frees the device shard without a write-back
  }

  /** Make `u`'s gathered buffer its parameters. @throws when `u` is not gathered */
  use(u: UnitHandle): void {
    const b = this.resident.get(u);
    if (!b) throw new Error(`offload: expert ${u.name} used before it was gathered`);
    u.setParams(b);
  }

  /** Give idle expert `u` the shared zero placeholder of its size as parameters (see the module
   * comment); nothing is copied or gathered. */
  usePlaceholder(u: UnitHandle, ctx: HookContext): void {
    const key = `${u.dtype}:${u.numel}`;
    let b = this.placeholders.get(key);
    if (!b) {
      b = ctx.be.alloc(u.dtype, Math.max(1, u.numel), "gathered");
      ctx.be.fill({ buf: b, off: 0 }, 0, Math.max(1, u.numel));
      this.placeholders.set(key, b);
    }
    u.setParams(b);
  }

  /** Unset idle expert `u`'s placeholder parameters. */
  releasePlaceholder(u: UnitHandle): void {
    const b = u.params();
    for (const p of this.placeholders.values()) if (p === b) u.setParams(null);
  }

  /** Free `u`'s gathered buffer (and unset its parameters). */
  drop(u: UnitHandle, ctx: HookContext): void {
    const b = this.resident.get(u);
    if (!b) return;
    if (u.params() === b) u.setParams(null);
    ctx.be.free(b);
    this.resident.delete(u);
  }

  /** Free every gathered buffer and placeholder (end of step). */
  dropAll(ctx: HookContext): void {
    for (const u of [...this.resident.keys()]) this.drop(u, ctx);
    for (const b of this.placeholders.values()) ctx.be.free(b);
    this.placeholders.clear();
  }
}
