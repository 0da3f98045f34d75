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
 * No collective is issued here: ZeRO-3 keeps the matched order of its all_gathers.
 */
import type { GatherHook, HookContext, Phase, UnitHandle } from "@zeromoe/core/plugin";
import type { HostLedger } from "./host-ledger.ts";

/** Wrap `prev` (ZeRO-3's gather hook) for offloaded parameter shards (see the module comment). */
export function offloadGatherWindow(prev: GatherHook, ledger: HostLedger): GatherHook {
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
            prefetch(v);
          }
        }
      }
      await prev.gather(unit, phase, ctx);
    },
    async release(unit: UnitHandle, phase: Phase, ctx: HookContext) {
      await prev.release(unit, phase, ctx);
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
      await prev.endStep?.(ctx);
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
