/**
 * Expert placement strategies (placement.ts): the layouts, the greedy balanced bin-packing on a
 * hand-worked example, the manifest record round trip, balanced placement from the loads a saved
 * run measured, the checkpoint hook's writers, and training equivalence with
 * `round_robin` and `balanced` placement (the experts live on other ranks, the results do not
 * change: forward bit-identical, parameters within 1e-6 of the single-rank run after 3 steps).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { balancedPlacement, contiguousPlacement, loadImbalance, placeExperts, placementForResume, placementFromRecord, placementRecord, roundRobinPlacement, type MoEManifestEntry } from "../src/index.ts";
import { TRAIN_ENTRY, tinyMoeJob, type RunOut } from "./fixtures/train-entry.ts";

describe("placement strategies", () => {
  test("contiguous and round_robin layouts", () => {
    expect(Array.from(contiguousPlacement(6, 3).owner)).toEqual([0, 0, 1, 1, 2, 2]);
    expect(contiguousPlacement(6, 3).local).toEqual([[0, 1], [2, 3], [4, 5]]);
    expect(Array.from(roundRobinPlacement(6, 3).owner)).toEqual([0, 1, 2, 0, 1, 2]);
    expect(roundRobinPlacement(6, 3).local).toEqual([[0, 3], [1, 4], [2, 5]]);
    expect(Array.from(contiguousPlacement(5, 1).owner)).toEqual([0, 0, 0, 0, 0]);
  });

  test("balanced: greedy LPT by load, E/P experts per rank (hand-worked example)", () => {
    // loads 50 40 30 20 10 5 3 1 over 4 ranks of 2 slots:
    // 50→r0, 40→r1, 30→r2, 20→r3, 10→r3 (30), 5→r2 (35), 3→r3? r3 is full → r1 (43), 1→r0 (51)
    const p = balancedPlacement(8, 4, [50, 40, 30, 20, 10, 5, 3, 1]);
    expect(Array.from(p.owner)).toEqual([0, 1, 2, 3, 3, 2, 1, 0]);
    expect(p.local.every((l) => l.length === 2)).toBe(true);
    const skew = [40, 30, 2, 1, 1, 1, 1, 1];
    expect(loadImbalance(balancedPlacement(8, 4, skew), skew)).toBeLessThan(loadImbalance(contiguousPlacement(8, 4), skew));
    expect(loadImbalance(contiguousPlacement(8, 4), skew)).toBeCloseTo(70 / (77 / 4), 10);
    expect(() => balancedPlacement(8, 4, [1, 2])).toThrow(/load has 2 entries, expected num_local_experts 8/);
    expect(() => balancedPlacement(8, 3, skew)).toThrow(/num_local_experts 8 is not divisible by moe.ep_size 3/);
  });

  test("placeExperts per layer; balanced without loads falls back to contiguous; record round trip", () => {
    const loads = [[9, 8, 1, 2], undefined]; // 9→r0, 8→r1, 2→r1 (8 < 9), 1→r0
    const layers = placeExperts("balanced", 2, 4, 2, loads);
    expect(Array.from(layers[0]!.owner)).toEqual([0, 1, 0, 1]);
    expect(Array.from(layers[1]!.owner)).toEqual([0, 0, 1, 1]);
    const rec = placementRecord("balanced", 2, layers, loads);
    const json = JSON.parse(JSON.stringify(rec));
    expect(json.owner).toEqual([[0, 1, 0, 1], [0, 0, 1, 1]]);
    const back = placementFromRecord(json, 2, 4, 2);
    expect(back.map((p) => Array.from(p.owner))).toEqual(layers.map((p) => Array.from(p.owner)));
    expect(() => placementFromRecord(json, 2, 4, 4)).toThrow(/ep_size 2 differs from the job's moe.ep_size 4/);
    expect(() => placementFromRecord({ ...json, owner: [[0, 0, 0, 1], [0, 0, 1, 1]] }, 2, 4, 2)).toThrow(/does not give every rank 2 experts/);
  });
});

describe("training with round_robin and balanced placement matches the single-rank run", async () => {
  const steps = 3;
  const base = (await launch<RunOut[]>({ worldSize: 1, entry: TRAIN_ENTRY, args: { runs: [{ job: tinyMoeJob({ gradient_accumulation_steps: 4 }), steps }] } }))[0]![0]!;
  const loads = [[5, 90, 3, 40], [70, 1, 60, 2]];
  const runs = [
    { label: "round_robin, ep_size 2, stage 3", steps, job: tinyMoeJob({ moe: { ep_size: 2, placement: "round_robin" }, zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 } }) },
    { label: "balanced, ep_size 2, stage 2", steps, loads, job: tinyMoeJob({ moe: { ep_size: 2, placement: "balanced" }, zero_optimization: { stage: 2 } }) },
    { label: "balanced, ep_size 4, stage 1", steps, loads, job: tinyMoeJob({ moe: { ep_size: 4, placement: "balanced" }, zero_optimization: { stage: 1 } }) },
  ];
  const res = await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs } }) as unknown as RunOut[][];
  runs.forEach((run, i) => {
    test(run.label, () => {
      const outs = res.map((r) => r[i]!);
      const m: Record<string, number[]> = {};
      for (const o of outs) Object.assign(m, o.params);
      let d = 0;
      for (const [k, v] of Object.entries(base.params)) for (let j = 0; j < v.length; j++) d = Math.max(d, Math.abs(v[j]! - m[k]![j]!));
      expect(d).toBeLessThan(1e-6);
      expect(outs[0]!.losses[0]).toBe(base.losses[0]!);
      const rec = outs[0]!.placement!;
      const ep = rec.ep_size;
      // every rank holds exactly the experts the record assigns to its EP rank
      outs.forEach((o, rank) => {
        for (let l = 0; l < 2; l++) for (let e = 0; e < 4; e++) {
          const held = `model.layers.${l}.block_sparse_moe.experts.${e}.w1.weight` in o.params;
          expect(held).toBe(rec.owner[l]![e] === rank % ep);
        }
      });
      if (run.loads) expect(rec.owner).toEqual(placeExperts("balanced", 2, 4, ep, loads).map((p) => Array.from(p.owner)));
    });
  });
});

describe("checkpoint hook with expert parallelism (world 4, ep_size 2)", async () => {
  const runs = [0, 2].map((stage) => ({ label: `stage ${stage}`, steps: 1, job: tinyMoeJob({ moe: { ep_size: 2, placement: "round_robin" }, zero_optimization: { stage } }) }));
  const res = await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs } }) as unknown as RunOut[][];
  const units = ["embed", "layers.0", "layers.1", "head", ...[0, 1].flatMap((l) => [0, 1, 2, 3].map((e) => `layers.${l}.experts.${e}`))];
  test("stage 0: every unit is written by exactly one rank (an expert by the first rank of its edp group)", () => {
    const writers = new Map<string, number[]>();
    res.forEach((r, rank) => r[0]!.owned.forEach((u) => writers.set(u, [...(writers.get(u) ?? []), rank])));
    expect([...writers.keys()].sort()).toEqual([...units].sort());
    for (const [u, w] of writers) {
      expect(w.length).toBe(1);
      if (u.includes(".experts.")) expect(w[0]! < 2).toBe(true); // edp groups [0,2] and [1,3]: first members 0 and 1
    }
  });
  test("stage 2: sharded expert states are written by both ranks of their edp group; manifest records the placement", () => {
    const writers = new Map<string, number[]>();
    res.forEach((r, rank) => r[1]!.owned.forEach((u) => writers.set(u, [...(writers.get(u) ?? []), rank])));
    for (const u of units) expect(writers.get(u)!.length).toBe(u.includes(".experts.") ? 2 : 4);
    for (const r of res) expect((r[1]!.manifest as { moe: { placement: unknown } }).moe.placement).toEqual(JSON.parse(JSON.stringify(r[1]!.placement)));
    expect((res[0]![1]!.manifest as { moe: { placement: { owner: number[][] } } }).moe.placement.owner).toEqual([[0, 1, 0, 1], [0, 1, 0, 1]]);
  });
});

describe("balanced placement from the loads a saved run measured (manifest moe.expert_loads)", async () => {
  const res = await launch<RunOut[]>({ worldSize: 2, entry: TRAIN_ENTRY, args: { runs: [{ steps: 2, job: tinyMoeJob({ moe: { ep_size: 2 } }) }] } }) as unknown as RunOut[][];
  test("the manifest carries the dp-summed counts; a balanced job resuming from it bin-packs by them", () => {
    const entry = res[0]![0]!.manifest!.moe as MoEManifestEntry;
    const counts = res[0]![0]!.stats.reduce((acc, s) => acc.map((row, l) => row.map((c, e) => c + s.layers[l]!.counts[e]!)), [[0, 0, 0, 0], [0, 0, 0, 0]]);
    expect(entry.expert_loads).toEqual(counts);
    expect(entry.placement.owner).toEqual([[0, 0, 1, 1], [0, 0, 1, 1]]);
    const r = placementForResume(entry, "balanced", 2, 4, 2)!;
    expect(r.placement.map((p) => Array.from(p.owner))).toEqual(counts.map((l) => Array.from(balancedPlacement(4, 2, l).owner)));
    // same strategy and ep_size: the recorded placement; another ep_size: placed anew
    expect(placementForResume(entry, "contiguous", 2, 4, 2)!.placement.map((p) => Array.from(p.owner))).toEqual(entry.placement.owner);
    expect(placementForResume(entry, "contiguous", 2, 4, 4)).toBeNull();
  });
  for (const how of ["createMoEPlugin({ manifest })", "Engine.create({ restore }) (the --resume path)"] as const) {
    test(`an engine created with ${how} holds the experts of the re-balanced placement`, async () => {
      const entry = res[0]![0]!.manifest!.moe as MoEManifestEntry;
      const given = how.startsWith("create") ? { manifest: entry } : { restore: { moe: JSON.parse(JSON.stringify(entry)) } };
      const again = await launch<RunOut[]>({ worldSize: 2, entry: TRAIN_ENTRY, args: { runs: [{ steps: 1, ...given, job: tinyMoeJob({ moe: { ep_size: 2, placement: "balanced" } }) }] } }) as unknown as RunOut[][];
      const owner = entry.expert_loads!.map((l) => Array.from(balancedPlacement(4, 2, l).owner));
      expect(owner).not.toEqual(entry.placement.owner); // the experts do move
      expect(again[0]![0]!.placement!.owner).toEqual(owner);
      again.forEach((r, rank) => {
        for (let l = 0; l < 2; l++) for (let e = 0; e < 4; e++) expect(`model.layers.${l}.block_sparse_moe.experts.${e}.w1.weight` in r[0]!.params).toBe(owner[l]![e] === rank);
      });
    });
  }
});
