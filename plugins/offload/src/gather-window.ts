/**
 * The gather hook around ZeRO-3's (wrapped, not replaced) for parameter offload: offloaded shards
 * are copied host → device ahead of use and freed after.
 *
 * - The order units are gathered in is recorded during the first step (it is the same every step,
 *   as ZeRO-3's own trace); from then on, entering unit i first prefetches (`prefetchParams`: copy to
 *   the device, clean) the shards of the units that follow it in that order within
 *   `stage3_prefetch_bucket_size` elements — the window ZeRO-3 then all_gathers from.
 * - After a unit's release (ZeRO-3 has gathered it: its shard was read), its device shard is
 *   evicted (`evictParams`; written back only if something wrote through `paramStorage()`).
 * - `endStep` evicts whatever is left, so the optimizer step (host-side with offload) sees no stale
 *   device copy.
 * - MoE-aware (`skipIdleExperts`, on by default): an f32 expert unit that NO rank of its edp group
 *   routed tokens to in this forward is neither copied host → device nor all_gathered; its forward
 *   and backward gather/release are not passed on to ZeRO-3 (it computes nothing: no rows). The
 *   ranks agree through one all_reduce (sum) of the layer's per-expert row counts over the edp
 *   group, issued at the layer's first expert gather (every edp rank enters the same experts in the
 *   same order), none when the group has one rank. The backward repeats the forward's decision.
 *   Its zero gradient is still reduced and the optimizer still updates it at the step (AdamW's
 *   moments and weight decay move it), so the result is bit-identical. Expert units are then not
 *   fetched ahead (their decision is not known before routing) and ZeRO-3's own prefetch and reuse
 *   (`stage3_prefetch_bucket_size`, `stage3_max_reuse_distance`) are set to 0 in the context it
 *   sees: its prefetch would read a skipped expert's shard, and its choices follow its recorded
 *   trace, which stops matching across edp groups once they skip different experts. On the local
 *   transport that prefetch is awaited in program order anyway; without reuse a unit used in forward
 *   and backward is all_gathered twice (with parameter offload its device shard was evicted between
 *   anyway). 16-bit experts are always fetched (the unit's f32 working copy is
 *   made from its gathered data at every entry).
 * The collectives here are the all_reduces above; ZeRO-3 keeps the matched order of its all_gathers.
 */
import { expertRouting } from "@zeromoe/core/nn";
import type { GatherHook, HookContext, Phase, UnitHandle } from "@zeromoe/core/plugin";
import type { HostLedger } from "./host-ledger.ts";

/** Options of {@link offloadGatherWindow}. */
export interface GatherWindowOptions {
  /** Skip fetching experts no edp rank routed tokens to (default true; see the module comment). */
  skipIdleExperts?: boolean;
}

/** Wrap `prev` (ZeRO-3's gather hook) for offloaded parameter shards (see the module comment).
 * Counts host → device parameter bytes in `ledger.moved.param_h2d` and skipped fetches in
 * `ledger.moved.param_h2d_skipped` (the bytes a fetch of every expert would have added). */
export function offloadGatherWindow(prev: GatherHook, ledger: HostLedger, opts: GatherWindowOptions = {}): GatherHook {
  const skipIdle = opts.skipIdleExperts ?? true;
  const skipped = new Set<UnitHandle>();
  let decided: { id: number; idle: Set<string> } | null = null;
  let prevCtx: { of: HookContext; ctx: HookContext } | null = null;
  let hasCandidates: boolean | null = null;
  /** ZeRO-3's view of the context when experts may be skipped: its prefetch and its keeping of
   * released units off, so that its all_gathers follow the gather calls one for one (its trace
   * position differs between ranks of different edp groups once they skip different experts, and
   * residency decided from it would put dp-group all_gathers at different points). */
  const inner = (ctx: HookContext): HookContext => {
    hasCandidates ??= ctx.units().some(candidate);
    if (!hasCandidates) return ctx;
    if (prevCtx?.of === ctx) return prevCtx.ctx;
    const config = { ...ctx.config, zero_optimization: { ...ctx.config.zero_optimization, stage3_prefetch_bucket_size: 0, stage3_max_reuse_distance: 0 } };
    const c = Object.create(ctx, { config: { value: config } }) as HookContext;
    prevCtx = { of: ctx, ctx: c };
    return c;
  };
  const candidate = (u: UnitHandle) => skipIdle && u.kind === "expert" && u.dtype === "f32" && u.plan.params === "sharded" && offloaded(u);
  /** Whether `u` (a candidate, forward) received no rows on any rank of its edp group. */
  const idle = async (u: UnitHandle, ctx: HookContext): Promise<boolean> => {
    const r = expertRouting(u.name);
    if (!r) return false;
    if (decided?.id !== r.id) {
      const names = [...r.rows.keys()];
      const counts = new Float64Array(names.map((n) => r.rows.get(n)!));
      if (u.plan.group.size > 1) await ctx.comm.allReduce(counts, { group: u.plan.group });
      decided = { id: r.id, idle: new Set(names.filter((_, i) => counts[i] === 0)) };
    }
    return decided.idle.has(u.name);
  };
  const trace: UnitHandle[] = [];
  let recording = true;
  let pos = -1;
  const inUse = new Map<UnitHandle, number>();
  const offloaded = (u: UnitHandle) => u.paramDevice !== "device";
  const bytes = (u: UnitHandle) => u.plan.shardSize * (u.dtype === "f32" ? 4 : 2);
  const prefetch = (u: UnitHandle) => {
    if (!offloaded(u) || u.paramsResident()) return;
    u.prefetchParams();
    ledger.moved.param_h2d += bytes(u);
  };
  return {
    async gather(unit: UnitHandle, phase: Phase, ctx: HookContext) {
      if (candidate(unit)) {
        if (phase === "fwd") {
          if (await idle(unit, ctx)) skipped.add(unit);
          else skipped.delete(unit);
        }
        if (skipped.has(unit)) {
          ledger.moved.param_h2d_skipped += bytes(unit);
          return;
        }
      }
      if (unit.plan.params === "sharded") {
        if (recording) trace.push(unit);
        else {
          let next = pos + 1;
          if (trace[next] !== unit) next = trace.findIndex((t, i) => i > pos && t === unit);
          pos = next;
        }
        inUse.set(unit, (inUse.get(unit) ?? 0) + 1);
        prefetch(unit);
        if (!recording && pos >= 0) {
          let budget = ctx.config.zero_optimization.stage3_prefetch_bucket_size;
          for (let j = pos + 1; j < trace.length && budget > 0; j++) {
            const v = trace[j]!;
            if (v.numel > budget) break;
            budget -= v.numel;
            if (!candidate(v)) prefetch(v);
          }
        }
      }
      await prev.gather(unit, phase, inner(ctx));
    },
    async release(unit: UnitHandle, phase: Phase, ctx: HookContext) {
      if (skipped.has(unit)) return;
      await prev.release(unit, phase, inner(ctx));
      if (unit.plan.params !== "sharded") return;
      const n = (inUse.get(unit) ?? 1) - 1;
      if (n > 0) {
        inUse.set(unit, n);
        return;
      }
      inUse.delete(unit);
      if (offloaded(unit)) await evict(unit, ledger);
    },
    async endStep(ctx: HookContext) {
      await prev.endStep?.(inner(ctx));
      skipped.clear();
      ledger.paramSteps++;
      for (const u of ctx.units()) if (offloaded(u)) await evict(u, ledger);
      inUse.clear();
      if (recording && trace.length > 0) recording = false;
      pos = -1;
    },
  };
}

/** Evict `u`'s device shard, counting a write-back as bytes moved device → host. */
async function evict(u: UnitHandle, ledger: HostLedger): Promise<void> {
  if (!u.paramsResident()) return;
  await u.evictParams();
}
