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
 *   routed tokens to in this forward is neither copied host → device, nor all_gathered, nor
 *   prefetched (the layer's grouped matmuls get a shared zero placeholder for it: expert-fetch.ts). The ranks agree through one all_reduce (sum) of the layer's per-expert row counts
 *   over the edp group, issued at the layer's first expert gather (every edp rank enters the same
 *   experts in the same order), none when the group has one rank; the backward repeats the
 *   forward's decision. Its zero gradient is still reduced and the optimizer still updates it at the
 *   step (AdamW's moments and weight decay move it), so the result is bit-identical.
 *   Such expert units (f32, sharded, offloaded) are gathered by this wrapper (expert-fetch.ts: the
 *   same all_gather over the edp group ZeRO-3 would issue), never passed to ZeRO-3: ZeRO-3 sees only
 *   the units every rank gathers in the same order, so its recorded trace, its prefetch
 *   (`stage3_prefetch_bucket_size`) and its reuse (`stage3_max_reuse_distance`) stay on and valid on
 *   every rank (before, they had to be forced to 0: its trace stopped matching across edp groups
 *   once they skipped different experts). The wrapper prefetches experts itself, once the layer's
 *   decision is known: after gathering an active expert it fetches the layer's next active experts
 *   in the phase's order (ascending in forward, descending in backward) within
 *   `stage3_prefetch_bucket_size` elements, skipping idle ones. Experts are released after each use
 *   (no reuse between forward and backward) and are not counted in ZeRO-3's
 *   `stage3_max_live_parameters`. 16-bit experts are always fetched, by ZeRO-3 (the unit's f32
 *   working copy is made from its gathered data at every entry).
 * Collectives here: the decision all_reduces and the expert all_gathers, both awaited where they are
 * decided, in the same program order on every rank of the edp group.
 */
import { DTYPE_BYTES } from "@zeromoe/kernels";
import { expertRouting } from "@zeromoe/core/nn";
import type { GatherHook, HookContext, Phase, UnitHandle } from "@zeromoe/core/plugin";
import { ExpertFetcher } from "./expert-fetch.ts";
import type { HostLedger } from "./host-ledger.ts";

/** Options of {@link offloadGatherWindow}. */
export interface GatherWindowOptions {
  /** Skip fetching experts no edp rank routed tokens to (default true; see the module comment). */
  skipIdleExperts?: boolean;
}

/** One layer's decision for the current micro-batch's forward: this rank's listed experts in
 * forward order and the names of those no edp rank routed tokens to. */
interface LayerDecision {
  id: number;
  order: UnitHandle[];
  idle: Set<string>;
}

/** Wrap `prev` (ZeRO-3's gather hook) for offloaded parameter shards (see the module comment).
 * Counts host → device parameter bytes in `ledger.moved.param_h2d` and skipped fetches in
 * `ledger.moved.param_h2d_skipped` (the bytes a fetch of every expert would have added).
 * `stats()` is ZeRO-3's (when it has one) plus `expertFetches`, the experts this wrapper gathered. */
export function offloadGatherWindow(prev: GatherHook, ledger: HostLedger, opts: GatherWindowOptions = {}): GatherHook & { stats(): Record<string, number> } {
  const skipIdle = opts.skipIdleExperts ?? true;
  const skipped = new Set<UnitHandle>();
  const experts = new ExpertFetcher(ledger);
  const layers = new Map<number, LayerDecision>();
  const offloaded = (u: UnitHandle) => u.paramDevice !== "device";
  const candidate = (u: UnitHandle) => skipIdle && u.kind === "expert" && u.dtype === "f32" && u.plan.params === "sharded" && offloaded(u);
  const bytes = (u: UnitHandle) => u.plan.shardSize * DTYPE_BYTES[u.dtype];
  /** The decision of `u`'s layer for this forward (made at its first expert gather), or null
   * outside a GroupedExperts forward (then `u` is fetched on demand). */
  const decide = async (u: UnitHandle, ctx: HookContext): Promise<LayerDecision | null> => {
    const r = expertRouting(u.name);
    if (!r) return null;
    const key = u.layer ?? -1;
    const had = layers.get(key);
    if (had?.id === r.id) return had;
    const rows = r.rows ?? (await r.readRows());
    const names = [...r.experts];
    const counts = new Float64Array(names.map((n) => rows.get(n)!));
    if (u.plan.group.size > 1) await ctx.comm.allReduce(counts, { group: u.plan.group });
    const d: LayerDecision = { id: r.id, order: names.map((n) => ctx.unit(n)), idle: new Set(names.filter((_, i) => counts[i] === 0)) };
    layers.set(key, d);
    return d;
  };
  /** Gather candidate expert `unit` (active) and prefetch the layer's next active experts. */
  const gatherExpert = async (unit: UnitHandle, phase: Phase, d: LayerDecision | null, ctx: HookContext) => {
    await experts.fetch(unit, ctx);
    experts.use(unit);
    if (!d) return;
    // the phase's order: ascending in forward, descending in backward (no reversed copy per gather)
    const { order } = d;
    const dir = phase === "fwd" ? 1 : -1;
    let budget = ctx.config.zero_optimization.stage3_prefetch_bucket_size;
    for (let j = order.indexOf(unit) + dir; j >= 0 && j < order.length && budget > 0; j += dir) {
      const v = order[j]!;
      if (d.idle.has(v.name) || !candidate(v)) continue; // an idle expert is never prefetched
      if (v.numel > budget) break;
      budget -= v.numel;
      await experts.fetch(v, ctx);
    }
  };
  const trace: UnitHandle[] = [];
  let recording = true;
  let pos = -1;
  const inUse = new Map<UnitHandle, number>();
  const prefetch = (u: UnitHandle) => {
    if (!offloaded(u) || u.paramsResident()) return;
    u.prefetchParams();
    ledger.moved.param_h2d += bytes(u);
  };
  return {
    async gather(unit: UnitHandle, phase: Phase, ctx: HookContext) {
      if (candidate(unit)) {
        let d: LayerDecision | null;
        if (phase === "fwd") {
          d = await decide(unit, ctx);
          if (d?.idle.has(unit.name)) skipped.add(unit);
          else skipped.delete(unit);
        } else d = layers.get(unit.layer ?? -1) ?? null;
        if (skipped.has(unit)) {
          ledger.moved.param_h2d_skipped += bytes(unit);
          experts.usePlaceholder(unit, ctx);
          return;
        }
        await gatherExpert(unit, phase, d, ctx);
        return;
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
            prefetch(v);
          }
        }
      }
      await prev.gather(unit, phase, ctx);
    },
    async release(unit: UnitHandle, phase: Phase, ctx: HookContext) {
      if (candidate(unit)) {
        if (skipped.has(unit)) experts.releasePlaceholder(unit);
        else experts.drop(unit, ctx);
        return;
      }
      await prev.release(unit, phase, ctx);
      if (unit.plan.params !== "sharded") return;
      const n = (inUse.get(unit) ?? 1) - 1;
      if (n > 0) {
        inUse.set(unit, n);
        return;
      }
      inUse.delete(unit);
      if (offloaded(unit)) await evict(unit);
    },
    async endStep(ctx: HookContext) {
      await prev.endStep?.(ctx);
      experts.dropAll(ctx);
      skipped.clear();
      layers.clear();
      ledger.paramSteps++;
      for (const u of ctx.units()) if (offloaded(u)) await evict(u);
      inUse.clear();
      if (recording && trace.length > 0) recording = false;
      pos = -1;
    },
    stats() {
      const inner = (prev as GatherHook & { stats?: () => Record<string, number> }).stats?.() ?? {};
      return { ...inner, expertFetches: experts.fetches };
    },
  };
}

/** Evict `u`'s device shard (written back to the host only when dirty). */
async function evict(u: UnitHandle): Promise<void> {
  if (!u.paramsResident()) return;
  await u.evictParams();
}
