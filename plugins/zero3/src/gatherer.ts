/**
 * ZeRO-3 parameter gathering: all_gather a unit's parameter shards on demand, prefetch ahead of
 * use, and release under DeepSpeed's documented limits (docs/domain.md §3):
 *
 * - `stage3_prefetch_bucket_size` (elements): after gathering a unit, the units that follow it in
 *   the recorded order of use are fetched ahead until this many elements are in flight or resident
 *   beyond the current one. The order of use is recorded during the first step (forward order, then
 *   backward order) and is identical on every rank, so prefetch collectives stay matched.
 * - `stage3_max_reuse_distance` (elements): at release, a unit whose next use comes after fewer than
 *   this many parameter elements of computation (strictly less, as DeepSpeed's coordinator counts
 *   it) is kept resident; 0 releases every unit after each use.
 * - `stage3_max_live_parameters` (elements): kept units are evicted (farthest next use first) so
 *   that gathered elements stay within this bound: at release, and before a demand fetch (making
 *   room for the unit). Units in use are never evicted, so the bound cannot go below the largest
 *   set of units in use at once (a layer and one of its experts; the head). Together with the
 *   prefetch rule, the gathered elements (resident or being fetched) stay within
 *   `stage3_max_live_parameters + stage3_prefetch_bucket_size` whenever the former is at least
 *   that largest in-use set (tested in plugins/zero3/test). In bytes of the parameter dtype: the
 *   f32 working copies that 16-bit units make while in use (core/src/nn/unit.ts `materialize`,
 *   also tagged `gathered`) come on top.
 * - units with fewer than `stage3_param_persistence_threshold` elements are never partitioned
 *   (the partition hook plans them replicated; gather skips them).
 *
 * After every optimizer step all gathered copies are stale and are freed (`endStep`).
 * Gathered buffers are tagged `gathered`.
 *
 * Collective order and overlap: a fetch *issues* its all_gather at once — the shard's device read
 * is its promised input, so the collective's place in the rank's order is fixed where the fetch is
 * decided, identically on every rank, whenever the read completes (core/src/comm) — and the
 * gathered buffer is written when the collective completes. `gather` waits only for the unit it
 * was asked for; the prefetches it decides stay in flight while that unit computes, and are waited
 * when their own unit is gathered (or at eviction, which picks only among resident units and so
 * first waits for fetches in flight, keeping what is resident independent of timing; or at the end
 * of the step).
 */
import type { Buf } from "@zeromoe/kernels";
import { readPadded, type GatherHook, type HookContext, type Phase, type UnitHandle } from "@zeromoe/core/plugin";

type EngineEnv = HookContext;
type Unit = UnitHandle;

interface Use {
  unit: Unit;
  phase: Phase;
}

/** A gather hook with prefetch and release policies (see the module comment). */
export function createGatherer(): GatherHook & { stats(): { fetches: number; peakLiveElements: number } } {
  const resident = new Map<Unit, Buf>();
  const inflight = new Map<Unit, Promise<void>>();
  const inUse = new Map<Unit, number>();
  let trace: Use[] = [];
  let recording = true;
  let pos = -1;
  let fetches = 0;
  let peakLive = 0;

  const sharded = (u: Unit) => u.plan.params === "sharded";
  /** Gathered elements resident or being fetched (a fetch's buffer counts from its start). */
  const liveElements = () => {
    let s = 0;
    for (const u of resident.keys()) s += u.numel;
    for (const u of inflight.keys()) if (!resident.has(u)) s += u.numel;
    return s;
  };

  const fetch = (env: EngineEnv, u: Unit): Promise<void> => {
    const existing = inflight.get(u);
    if (existing) return existing;
    if (resident.has(u)) return Promise.resolve();
    const p = u.plan;
    const stored = u.paramStorage().buf;
    fetches++;
    if (p.group.size === 1) {
      // a one-rank group (world 1, or expert units when ep_size = world size): the shard is the
      // whole unit, so a device copy replaces the read, all_gather and write back
      const buf = env.be.alloc(u.dtype, Math.max(1, u.numel), "gathered");
      if (u.numel > 0) env.be.copy({ buf: stored, off: 0 }, { buf, off: 0 }, u.numel);
      resident.set(u, buf);
      peakLive = Math.max(peakLive, liveElements());
      return Promise.resolve();
    }
    // the device read starts now; the all_gather is issued now with the read as its input, so its
    // place in the order of collectives is this one on every rank
    const shard = readPadded(env.be, stored, 0, p.shardSize, p.shardSize);
    const work = env.comm.allGather(shard, undefined, { group: p.group });
    const pr = work.wait().then((full) => {
      const buf = env.be.alloc(u.dtype, Math.max(1, u.numel), "gathered");
      if (u.numel > 0) env.be.write({ buf, off: 0 }, full.subarray(0, u.numel));
      resident.set(u, buf);
      peakLive = Math.max(peakLive, liveElements());
      inflight.delete(u);
    });
    // a failed prefetch is reported where its unit is waited, not as an unhandled rejection
    pr.catch(() => undefined);
    inflight.set(u, pr);
    peakLive = Math.max(peakLive, liveElements());
    return pr;
  };

  const drop = (env: EngineEnv, u: Unit) => {
    const b = resident.get(u);
    if (!b) return;
    if (u.params() === b) u.setParams(null);
    env.be.free(b);
    resident.delete(u);
  };

  /** Elements of computation between trace position i and the next use of its unit (∞ if none). */
  const reuseDistance = (i: number): number => {
    const u = trace[i]!.unit;
    let d = 0;
    for (let j = i + 1; j < trace.length; j++) {
      if (trace[j]!.unit === u) return d;
      d += trace[j]!.unit.numel;
    }
    return Number.POSITIVE_INFINITY;
  };

  /** Trace position of the next use of `u` after the current position (∞ if none). */
  const nextUse = (u: Unit): number => {
    for (let j = pos + 1; j < trace.length; j++) if (trace[j]!.unit === u) return j;
    return Number.POSITIVE_INFINITY;
  };

  /** Evict kept units (farthest next use first) until at most `maxLive` elements are gathered.
   * Fetches in flight are awaited first, so the choice does not depend on which have landed. */
  const evictFor = async (env: EngineEnv, maxLive: number) => {
    if (liveElements() <= maxLive) return;
    if (inflight.size > 0) await Promise.all(inflight.values());
    while (liveElements() > maxLive) {
      let victim: Unit | null = null;
      let far = -1;
      for (const u of resident.keys()) {
        if (inUse.has(u)) continue;
        const j = recording ? Number.POSITIVE_INFINITY : nextUse(u);
        if (j > far) {
          far = j;
          victim = u;
        }
      }
      if (!victim) return;
      drop(env, victim);
    }
  };

  return {
    async gather(unit, phase, env) {
      if (!sharded(unit)) return;
      const z = env.config.zero_optimization;
      if (recording) trace.push({ unit, phase });
      else {
        // advance along the recorded order; resynchronise if the order changed
        let next = pos + 1;
        if (trace[next]?.unit !== unit) next = trace.findIndex((t, i) => i > pos && t.unit === unit);
        pos = next;
      }
      inUse.set(unit, (inUse.get(unit) ?? 0) + 1);
      // a demand fetch first evicts kept units (farthest next use first) so that the gathered
      // elements stay within stage3_max_live_parameters where the units in use allow it
      if (!resident.has(unit) && !inflight.has(unit)) await evictFor(env, z.stage3_max_live_parameters - unit.numel);
      await fetch(env, unit);
      unit.setParams(resident.get(unit)!);
      if (!recording && pos >= 0) {
        let budget = z.stage3_prefetch_bucket_size;
        for (let j = pos + 1; j < trace.length && budget > 0; j++) {
          const v = trace[j]!.unit;
          if (resident.has(v) || inflight.has(v)) continue;
          if (v.numel > budget) break;
          if (liveElements() + v.numel > z.stage3_max_live_parameters + z.stage3_prefetch_bucket_size) break;
          budget -= v.numel;
          // issued, not waited: it runs while this unit computes (see the module comment)
          void fetch(env, v);
        }
      }
    },
    async release(unit, _phase, env) {
      if (!sharded(unit)) return;
      const z = env.config.zero_optimization;
      const n = (inUse.get(unit) ?? 1) - 1;
      if (n > 0) inUse.set(unit, n);
      else inUse.delete(unit);
      if (n > 0) return;
      const i = recording ? -1 : pos;
      const keep = i >= 0 && reuseDistance(i) < z.stage3_max_reuse_distance;
      if (!keep) drop(env, unit);
      else unit.setParams(null);
      await evictFor(env, z.stage3_max_live_parameters);
    },
    async endStep(env) {
      await Promise.all(inflight.values());
      for (const u of [...resident.keys()]) drop(env, u);
      inUse.clear();
      if (recording && trace.length > 0) recording = false;
      pos = -1;
    },
    // units moved between ranks (live expert re-placement): the handles of the recorded order are
    // stale, so the next step records it again (as the first step of a resumed job does)
    async unitsChanged(env) {
      await Promise.all(inflight.values());
      for (const u of [...resident.keys()]) drop(env, u);
      inUse.clear();
      trace = [];
      recording = true;
      pos = -1;
    },
    stats: () => ({ fetches, peakLiveElements: peakLive }),
  };
}
