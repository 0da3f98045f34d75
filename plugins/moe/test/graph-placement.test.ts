/**
 * Routing statistics that see pairs (co-occurrence.ts), the rank topology file (topology.ts) and
 * the `co_occurrence` / `topology` placements (graph-placement.ts): counts against an independent
 * per-token reference on random routing of awkward sizes, the topology file's errors, and on a
 * small deterministic router skewed to fixed expert teams the direction of the traffic reductions
 * and the per-rank load balance (the bench, plugins/moe/bench/placement.ts, prints the figures).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { ConfigError } from "@zeromoe/core/config";
import { addPairCounts, addTraffic, crossGroup, crossRank } from "../src/co-occurrence.ts";
import { coOccurrencePlacement, topologyPlacement } from "../src/graph-placement.ts";
import { placeExperts } from "../src/placement.ts";
import { epGroupsOf, parseTopology } from "../src/topology.ts";
import { measure } from "../bench/placement.ts";
import { pairRouterIndices, prng } from "../bench/_pair-router.ts";

function randomIndices(T: number, k: number, E: number, seed: number, dropFrac = 0.1): Int32Array {
  const r = prng(seed);
  const out = new Int32Array(T * k);
  for (let t = 0; t < T; t++) {
    const picked = new Set<number>();
    for (let s = 0; s < k; s++) {
      let e: number;
      do e = Math.floor(r() * E);
      while (picked.has(e));
      picked.add(e);
      out[t * k + s] = r() < dropFrac ? -1 : e;
    }
  }
  return out;
}

describe("routing statistics that see pairs", () => {
  test("co-occurrence and traffic equal a per-token reference (T 37, k 3, E 7, P 7 ranks; drops)", () => {
    const T = 37, k = 3, E = 7, P = 7;
    const idx = randomIndices(T, k, E, 5);
    const pairs = new Float64Array(E * E);
    addPairCounts(idx, T, k, E, pairs);
    const owner = Int32Array.from([3, 0, 6, 1, 5, 2, 4]);
    const rows = new Float64Array(P * P);
    const copies = new Float64Array(P * P);
    addTraffic(idx, T, k, owner, 2, P, rows, copies);
    const refPairs = new Float64Array(E * E);
    const refRows = new Float64Array(P * P);
    const refCopies = new Float64Array(P * P);
    for (let t = 0; t < T; t++) {
      const es = Array.from(idx.subarray(t * k, t * k + k)).filter((e) => e >= 0);
      for (const a of es) for (const b of es) if (a !== b) refPairs[a * E + b]! += 1;
      for (const e of es) refRows[2 * P + owner[e]!]! += 1;
      for (const d of new Set(es.map((e) => owner[e]!))) refCopies[2 * P + d]! += 1;
    }
    expect(Array.from(pairs)).toEqual(Array.from(refPairs));
    expect(Array.from(rows)).toEqual(Array.from(refRows));
    expect(Array.from(copies)).toEqual(Array.from(refCopies));
    expect(crossRank(rows, P)).toBe(Array.from(refRows).reduce((a, b) => a + b, 0) - refRows[2 * P + 2]!);
    expect(crossGroup(copies, [0, 0, 0, 1, 1, 1, 1])).toBe([3, 4, 5, 6].reduce((a, d) => a + refCopies[2 * P + d]!, 0));
  });

  test("PairStatsRecorder: steps add up, summary matrices and traffic section (E 5, P 2, one rank)", async () => {
    const { PairStatsRecorder } = await import("../src/pair-stats.ts");
    const rec = new PairStatsRecorder(2, 5, 2, [1]);
    rec.setPlacement([[0, 0, 0, 1, 1], [0, 1, 0, 1, 1]], 1);
    const comm = { allReduce: async () => { throw new Error("no reduce at group size 1"); } } as never;
    const group = { ranks: [0], size: 1, rank: 0, name: "dp" } as never;
    rec.observe(1, [0, 3, 1, 4, 2, 2], 3, 2); // tokens (0,3) (1,4) (2,2)
    await rec.reduceStep(comm, group);
    rec.observe(1, [0, 3, -1, 4], 2, 2);
    await rec.reduceStep(comm, group);
    const m = rec.pairMatrices();
    expect(m[0]).toEqual([]);
    expect(m[1]![0]![3]).toBe(2);
    expect(m[1]![3]![0]).toBe(2);
    expect(m[1]![1]![4]).toBe(1);
    expect(m[1]![2]![2]).toBe(0);
    const t = rec.trafficSection()!;
    // source EP rank 1; layer 1 owners [0,1,0,1,1]: rows to rank 0: experts 0,2,2,0 = 4; to rank 1: 3,1,4,3,4 = 5
    expect(t.layers[0]!.rows).toEqual([[0, 0], [4, 5]]);
    // copies: token (0,3) → {0,1}, (1,4) → {1}, (2,2) → {0}; step 2: (0,3) → {0,1}, (·,4) → {1}
    expect(t.layers[0]!.copies).toEqual([[0, 0], [3, 4]]);
    expect(t.layers[0]!.cross_rank_copies).toBe(3);
  });

  test("bench pairTraffic (top-2 copies from the pair counts alone) equals the per-token count", async () => {
    const { pairTraffic } = await import("../bench/placement.ts");
    const T = 301, E = 12, P = 4;
    const idx = randomIndices(T, 2, E, 9, 0);
    const pairs = new Float64Array(E * E);
    addPairCounts(idx, T, 2, E, pairs);
    const owner = Int32Array.from([2, 0, 1, 3, 3, 0, 2, 1, 0, 1, 2, 3]);
    const rows = new Float64Array(P * P);
    const copies = new Float64Array(P * P);
    addTraffic(idx, T, 2, owner, 0, P, rows, copies);
    const load = new Float64Array(E);
    for (const e of idx) load[e]! += 1;
    expect(pairTraffic(pairs, load, owner, E, P).copies).toBe(copies.reduce((a, b) => a + b, 0));
  });

  test("an index outside [−1, E) is refused", () => {
    expect(() => addPairCounts([0, 9], 1, 2, 4, new Float64Array(16))).toThrow(/expert index 9 outside \[0, 4\)/);
  });
});

describe("topology file (moe.topology)", () => {
  const bad = (text: string, W: number): string => {
    try {
      parseTopology(text, W, "topo.json");
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as ConfigError).issues.map((i) => `${i.path}: ${i.message}`).join("\n");
    }
    throw new Error("accepted");
  };
  test("JSON groups and hostfiles", () => {
    expect(parseTopology('{"groups": [[1, 0], [2, 3]]}', 4)).toEqual([[0, 1], [2, 3]]);
    expect(parseTopology("# hosts\nnode-a slots=2\nnode-b slots=2\n", 4)).toEqual([[0, 1], [2, 3]]);
    expect(epGroupsOf([[0, 1], [2, 3]], 4, 4)).toEqual([[0, 1], [2, 3]]);
    // world 8, ep 4: each EP group (0..3, 4..7) lies on two hosts of 2
    expect(epGroupsOf(parseTopology("a slots=2\nb slots=2\nc slots=2\nd slots=2", 8), 8, 4)).toEqual([[0, 1], [2, 3]]);
  });
  test("bad input names moe.topology", () => {
    expect(bad('{"groups": [[0, 1], [2]]}', 4)).toMatch(/^moe.topology: .*does not cover ranks 3/);
    expect(bad('{"groups": [[0, 1, 2], [3]]}', 4)).toMatch(/^moe.topology: .*unequal sizes 3, 1/);
    expect(bad('{"groups": [[0, 1], [2, 7]]}', 4)).toMatch(/^moe.topology: .*names rank 7, outside \[0, 4\)/);
    expect(bad('{"groups": [[0, 1], [1, 2]]}', 3)).toMatch(/lists rank 1 twice/);
    expect(bad("{nope", 4)).toMatch(/not valid JSON/);
    expect(bad("host-a 4", 4)).toMatch(/line 1: expected "host slots=N"/);
    // world 6, ep 3: hosts of 2 split EP group 0..2 into 2 + 1
    expect(() => epGroupsOf([[0, 1], [2, 3], [4, 5]], 6, 3)).toThrow(/moe.topology: the EP group of world ranks 0..2 is split into topology groups of unequal sizes 2, 1/);
    // world 8, ep 4: EP group 0 on two hosts, EP group 1 on one
    expect(() => epGroupsOf([[0, 1, 4, 5], [2, 3, 6, 7]].map((g) => g), 8, 4)).not.toThrow();
    expect(() => epGroupsOf([[0, 1, 4, 6], [2, 3, 5, 7]], 8, 4)).toThrow(/split differently from EP group 0/);
  });
});

describe("co_occurrence and topology placements", () => {
  test("equal experts per rank; planted teams share a rank; topology keeps a team inside a group", () => {
    const E = 12, P = 4;
    const team = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]; // teams of 3 scattered over indices
    const w = new Float64Array(E * E);
    for (let a = 0; a < E; a++) for (let b = 0; b < E; b++) if (a !== b) w[a * E + b] = team[a] === team[b] ? 10 : 1;
    const co = coOccurrencePlacement(E, P, w);
    expect(co.local.map((l) => l.length)).toEqual([3, 3, 3, 3]);
    for (const l of co.local) expect(new Set(l.map((e) => team[e])).size).toBe(1);
    const tp = topologyPlacement(E, P, [[0, 2], [1, 3]], w);
    expect(tp.local.map((l) => l.length)).toEqual([3, 3, 3, 3]);
    for (const l of tp.local) expect(new Set(l.map((e) => team[e])).size).toBe(1);
    // without pairs: balanced by load (or contiguous)
    expect(Array.from(placeExperts("co_occurrence", 1, E, P, null, { pairs: null })[0]!.owner)).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    expect(() => placeExperts("topology", 1, E, P, null, { pairs: [w] })).toThrow(/needs moe.topology/);
  });

  test("skewed router (E 16, ep 4, k 2 and 4): co_occurrence cuts cross-rank copies ≥ 30 %, topology cuts cross-group copies, loads within 10 %", () => {
    for (const k of [2, 4]) {
      const warm = pairRouterIndices({ E: 16, k, tokens: 16384, seed: 11 });
      const step = pairRouterIndices({ E: 16, k, tokens: 4096, seed: 12 });
      const base = measure("contiguous", k, warm, step);
      const co = measure("co_occurrence", k, warm, step);
      const tp = measure("topology", k, warm, step);
      expect(co.copiesCross).toBeLessThan(0.7 * base.copiesCross);
      expect(tp.copiesCrossGroup).toBeLessThan(0.7 * base.copiesCrossGroup);
      expect(tp.copiesCrossGroup).toBeLessThanOrEqual(co.copiesCrossGroup * 1.05);
      for (const m of [co, tp]) {
        expect(m.loadMaxOverMean).toBeLessThanOrEqual(1.1);
        expect([0, 1, 2, 3].map((j) => m.owner.filter((o) => o === j).length)).toEqual([4, 4, 4, 4]);
      }
    }
  });
});
