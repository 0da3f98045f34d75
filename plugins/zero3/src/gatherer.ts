/**
 * ZeRO-3 parameter gathering: all_gather a unit's parameter shards on demand, prefetch ahead of
 * use, and release under DeepSpeed's documented limits (domain.md §3):
 *
 * - `stage3_prefetch_bucket_size` (elements): after gathering a unit, the units that follow it in
 *   the recorded order of use are fetched ahead until this many elements are in flight or resident
 *   beyond the current one. The order of use is recorded during the first step (forward order, then
 *   backward order) and is identical on every rank, so prefetch collectives stay matched.
 * - `stage3_max_reuse_distance` (elements): at release, a unit whose next use lies within this many
 *   parameter elements of computation is kept resident.
 * - `stage3_max_live_parameters` (elements): kept units are evicted (farthest next use first) so
 *   that resident gathered elements, excluding units in use, stay within this bound.
 * - units with fewer than `stage3_param_persistence_threshold` elements are never partitioned
 *   (the partition hook plans them replicated; gather skips them).
 *
 * After every optimizer step all gathered copies are stale and are freed (`endStep`).
 * Gathered buffers are tagged `gathered`.
 */
import type { Buf } from "@zeromoe/kernels/src/backend.ts";
import { readPadded, stateOf, type EngineEnv, type GatherHook, type Phase, type Unit } from "@zeromoe/core";

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

  const sharded = (env: EngineEnv, u: Unit) => stateOf(env, u).plan.params === "sharded";
  const liveElements = () => {
    let s = 0;
    for (const u of resident.keys()) s += u.numel;
    return s;
  };

  const fetch = (env: EngineEnv, u: Unit): Promise<void> => {
    const existing = inflight.get(u);
    if (existing) return existing;
    if (resident.has(u)) return Promise.resolve();
    const st = stateOf(env, u);
    const p = st.plan;
    fetches++;
    const pr = (async () => {
      const shard = await readPadded(env.be, st.paramShard!, 0, p.shardSize, p.shardSize);
      const full = await env.comm.allGather(shard, undefined, { group: p.group });
      const buf = env.be.alloc(u.dtype, Math.max(1, u.numel), "gathered");
      if (u.numel > 0) env.be.write({ buf, off: 0 }, full.subarray(0, u.numel));
      resident.set(u, buf);
      peakLive = Math.max(peakLive, liveElements());
      inflight.delete(u);
    })();
    inflight.set(u, pr);
    return pr;
  };

  const drop = (env: EngineEnv, u: Unit) => {
    const b = resident.get(u);
    if (!b) return;
    if (u.data === b) u.data = null;
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

  const evictFor = (env: EngineEnv, maxLive: number) => {
    while (liveElements() > maxLive) {
      let victim: Unit | null = null;
      for (const u of resident.keys()) if (!inUse.has(u)) { victim = u; break; }
      if (!victim) return;
      drop(env, victim);
    }
  };

  return {
    async gather(unit, phase, env) {
      if (!sharded(env, unit)) return;
      const z = env.config.zero_optimization;
      if (recording) trace.push({ unit, phase });
      else {
        // advance along the recorded order; resynchronise if the order changed
        let next = pos + 1;
        if (trace[next]?.unit !== unit) next = trace.findIndex((t, i) => i > pos && t.unit === unit);
        pos = next;
      }
      inUse.set(unit, (inUse.get(unit) ?? 0) + 1);
      await fetch(env, unit);
      unit.data = resident.get(unit)!;
      if (!recording && pos >= 0) {
        let budget = z.stage3_prefetch_bucket_size;
        for (let j = pos + 1; j < trace.length && budget > 0; j++) {
          const v = trace[j]!.unit;
          if (resident.has(v) || inflight.has(v)) continue;
          if (v.numel > budget) break;
          if (liveElements() + v.numel > z.stage3_max_live_parameters + z.stage3_prefetch_bucket_size) break;
          budget -= v.numel;
          void fetch(env, v);
        }
      }
    },
    async release(unit, _phase, env) {
      if (!sharded(env, unit)) return;
      const z = env.config.zero_optimization;
      const n = (inUse.get(unit) ?? 1) - 1;
      if (n > 0) inUse.set(unit, n);
      else inUse.delete(unit);
      if (n > 0) return;
      const i = recording ? -1 : pos;
      const keep = i >= 0 && reuseDistance(i) <= z.stage3_max_reuse_distance;
      if (!keep) drop(env, unit);
      else unit.data = null;
      evictFor(env, z.stage3_max_live_parameters);
    },
    async endStep(env) {
      await Promise.all(inflight.values());
      for (const u of [...resident.keys()]) drop(env, u);
      inUse.clear();
      if (recording && trace.length > 0) recording = false;
      pos = -1;
    },
    stats: () => ({ fetches, peakLiveElements: peakLive }),
  };
}
