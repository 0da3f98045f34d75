/**
 * The `co_occurrence` and `topology` placements in training (world 4, ep_size 4, a tiny mixtral
 * with 8 experts, 3 steps): every placement's losses equal the contiguous run's within 1e-6 (a
 * placement permutes where experts live, not what they compute), each rank holds the experts its
 * placement names, the graph placements really differ from contiguous; the pair statistics in the
 * checkpoint entry (co-occurrence counts symmetric, summing to the tokens per layer for top-2); a job resuming with `co_occurrence` places from the checkpoint's statistics; the
 * job keys' bad input is a ConfigError naming the key. A model whose gate prefers fixed pairs (the
 * router rows of each pair made equal, fixtures/train-entry.ts `pairedGate`) trained 2 steps with
 * contiguous placement, then resumed with `co_occurrence` from that checkpoint entry: the measured
 * cross-rank token copies of the dispatch drop ≥ 30 % (observed 1524 → 754), with `topology` (2 × 2)
 * the cross-group copies (observed 1024 → 530), loads within 10 %.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/launch";
import { ConfigError } from "@zeromoe/core/config";
import { crossGroup, placeExperts, pairsFromNested, type MoEManifestEntry } from "../src/index.ts";
import { placementInputs } from "../src/placement-inputs.ts";
import { TRAIN_ENTRY, tinyMoeJob, tinyMoeModel, type RunOut } from "./fixtures/train-entry.ts";

const E = 8;
const dir = mkdtempSync(join(tmpdir(), "zeromoe-graph-placement-"));
// a routing log whose planted pairs (0,5) (1,4) (2,7) (3,6) lie across the contiguous layout
const planted = Array.from({ length: E }, (_, a) => Array.from({ length: E }, (_, b) => ([[0, 5], [1, 4], [2, 7], [3, 6]].some(([x, y]) => (a === x && b === y) || (a === y && b === x)) ? 100 : a === b ? 0 : 1)));
const logPath = join(dir, "summary.json");
writeFileSync(logPath, JSON.stringify({ moe: { expert_pairs: [planted, planted], expert_counts: [new Array(E).fill(50), new Array(E).fill(50)] } }));
const topoPath = join(dir, "topology.json");
writeFileSync(topoPath, JSON.stringify({ groups: [[0, 2], [1, 3]] }));

const job = (moe: Record<string, unknown>) => tinyMoeJob({ model: tinyMoeModel({ num_local_experts: E }), moe: { ep_size: 4, ...moe } });

describe("graph placements in training (world 4, ep_size 4)", async () => {
  const steps = 3;
  const runs = [
    { label: "contiguous", steps, job: job({}) },
    { label: "round_robin", steps, job: job({ placement: "round_robin" }) },
    { label: "balanced", steps, job: job({ placement: "balanced", routing_log: logPath }) },
    { label: "co_occurrence", steps, job: job({ placement: "co_occurrence", routing_log: logPath }) },
    { label: "topology", steps, job: job({ placement: "topology", routing_log: logPath, topology: topoPath }) },
  ];
  const res = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs } })) as unknown as RunOut[][];
  const base = res[0]![0]!;
  runs.forEach((run, i) => {
    test(`${run.label}: losses within 1e-6 of contiguous; each rank holds its experts`, () => {
      const outs = res.map((r) => r[i]!);
      for (let s = 0; s < steps; s++) expect(Math.abs(outs[0]!.losses[s]! - base.losses[s]!)).toBeLessThan(1e-6);
      const rec = outs[0]!.placement!;
      outs.forEach((o, rank) => {
        for (let l = 0; l < 2; l++) for (let e = 0; e < E; e++) expect(`model.layers.${l}.block_sparse_moe.experts.${e}.w1.weight` in o.params).toBe(rec.owner[l]![e] === rank);
      });
      if (run.label === "co_occurrence" || run.label === "topology") {
        // the planted pairs share a rank
        for (const [x, y] of [[0, 5], [1, 4], [2, 7], [3, 6]]) expect(rec.owner[0]![x!]).toBe(rec.owner[0]![y!]!);
        expect(rec.owner[0]).not.toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
      }
    });
  });

  test("the checkpoint entry carries the pair statistics: Σ_{a<b} pairs = tokens (top-2), symmetric", () => {
    const moe = base.manifest!.moe as MoEManifestEntry;
    const pairs = pairsFromNested(moe.expert_pairs, 2, E, "expert_pairs");
    for (let l = 0; l < 2; l++) {
      const p = pairs[l]!;
      let upper = 0;
      for (let a = 0; a < E; a++) for (let b = 0; b < E; b++) {
        expect(p[a * E + b]).toBe(p[b * E + a]!);
        if (a < b) upper += p[a * E + b]!;
      }
      const tokens = base.stats.reduce((s, st) => s + st.layers.find((x) => x.layer === l)!.tokens, 0);
      expect(upper).toBe(tokens);
    }
  });

  test("a job resuming with co_occurrence places from the checkpoint's pairs and loads", async () => {
    const entry = base.manifest!.moe as MoEManifestEntry;
    const again = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: 1, manifest: entry, job: job({ placement: "co_occurrence" }) }] } })) as unknown as RunOut[][];
    const want = placeExperts("co_occurrence", 2, E, 4, entry.expert_loads, { pairs: pairsFromNested(entry.expert_pairs, 2, E, "x") }).map((p) => Array.from(p.owner));
    expect(again[0]![0]!.placement!.owner).toEqual(want);
    expect(again[0]![0]!.placement!.strategy).toBe("co_occurrence");
  });
});

describe("a gate that prefers fixed pairs (world 4, ep_size 4, E 8): co_occurrence from the warm-up's statistics cuts the dispatch's cross-rank token copies", async () => {
  const pairs = [[0, 5], [1, 4], [2, 7], [3, 6]];
  const pj = (moe: Record<string, unknown>) => tinyMoeJob({ model: tinyMoeModel({ num_local_experts: E, num_hidden_layers: 1 }), moe: { ep_size: 4, ...moe }, train_micro_batch_size_per_gpu: 8, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 }, optimizer: { type: "AdamW", params: { lr: 1e-6, weight_decay: 0 } } });
  const warm = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: 2, pairedGate: pairs, job: pj({}) }] } })) as unknown as RunOut[][];
  const entry = warm[0]![0]!.manifest!.moe as MoEManifestEntry;
  const topo22 = join(dir, "topology-2x2.json");
  writeFileSync(topo22, JSON.stringify({ groups: [[0, 1], [2, 3]] }));
  const placed = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: 2, pairedGate: pairs, manifest: entry, job: pj({ placement: "co_occurrence" }) }, { steps: 2, pairedGate: pairs, manifest: entry, job: pj({ placement: "topology", topology: topo22 }) }] } })) as unknown as RunOut[][];
  test("the warm-up's co-occurrence counts sit on the planted pairs; pairs share ranks; cross-rank copies drop ≥ 30 %, rows do not grow, loads stay within 10 %", () => {
    const p = pairsFromNested(entry.expert_pairs, 1, E, "expert_pairs")[0]!;
    const onPairs = pairs.reduce((s, [a, b]) => s + p[a! * E + b!]!, 0);
    let upper = 0;
    for (let a = 0; a < E; a++) for (let b = a + 1; b < E; b++) upper += p[a * E + b]!;
    expect(onPairs).toBe(upper);
    // pairs share a rank where the load cap (10 % over the mean) allows it
    const owner = placed[0]![0]!.placement!.owner[0]!;
    expect(pairs.filter(([a, b]) => owner[a!] === owner[b!]).length).toBeGreaterThanOrEqual(2);
    const before = warm[0]![0]!.traffic!.layers[0]!;
    const after = placed[0]![0]!.traffic!.layers[0]!;
    console.log(`paired gate, world 4 ep 4: cross-rank copies ${before.cross_rank_copies} → ${after.cross_rank_copies}, rows ${before.cross_rank_rows} → ${after.cross_rank_rows}`);
    expect(after.cross_rank_copies).toBeLessThanOrEqual(0.7 * before.cross_rank_copies);
    const load = [0, 1, 2, 3].map((j) => after.rows.reduce((s, row) => s + row[j]!, 0));
    const mean = load.reduce((a, b) => a + b, 0) / 4;
    expect(Math.max(...load)).toBeLessThanOrEqual(1.1 * mean);
  });
  test("topology (2 × 2): cross-group token copies drop against contiguous; loads within 10 %", () => {
    const before = warm[0]![0]!.traffic!.layers[0]!;
    const after = placed[0]![1]!.traffic!.layers[0]!;
    const g = [0, 0, 1, 1];
    const flat = (m: number[][]) => m.flat();
    const b = crossGroup(flat(before.copies), g);
    const a = crossGroup(flat(after.copies), g);
    console.log(`paired gate, world 4 ep 4, topology 2 × 2: cross-group copies ${b} → ${a}, cross-rank ${before.cross_rank_copies} → ${after.cross_rank_copies}`);
    expect(a).toBeLessThan(0.7 * b);
    const load = [0, 1, 2, 3].map((j) => after.rows.reduce((s, row) => s + row[j]!, 0));
    expect(Math.max(...load)).toBeLessThanOrEqual(1.1 * (load.reduce((x, y) => x + y, 0) / 4));
  });
});

describe("dispatch traffic counts what is sent: with capacity drops (world 2, ep 2, switch aux, capacity 0.5)", async () => {
  const run = (await launch<RunOut[]>({ worldSize: 2, entry: TRAIN_ENTRY, args: { runs: [{ steps: 2, job: tinyMoeJob({ moe: { ep_size: 2, drop_tokens: true, aux_loss: "switch", capacity_factor: 0.5, min_capacity: 1 } }) }] } })) as unknown as RunOut[][];
  test("Σ traffic rows = routed pairs − dropped pairs, per layer; copies ≤ rows", () => {
    const o = run[0]![0]!;
    for (const t of o.traffic!.layers) {
      const routed = o.stats.reduce((s, st) => s + st.layers.find((x) => x.layer === t.layer)!.counts.reduce((a, b) => a + b, 0), 0);
      const dropped = o.stats.reduce((s, st) => s + st.layers.find((x) => x.layer === t.layer)!.dropped, 0);
      expect(dropped).toBeGreaterThan(0);
      expect(t.rows.flat().reduce((a, b) => a + b, 0)).toBe(routed - dropped);
      expect(t.copies.flat().reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(routed - dropped);
    }
  });
});

describe("moe.topology and moe.routing_log bad input", () => {
  const issue = (f: () => unknown): string => {
    try {
      f();
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as ConfigError).issues.map((i) => `${i.path}: ${i.message}`).join("\n");
    }
    throw new Error("accepted");
  };
  const cfg = (o: Record<string, unknown>) => ({ placement: "contiguous" as const, topology: null, routing_log: null, ...o });
  test("each problem names its key", () => {
    expect(issue(() => placementInputs(cfg({ placement: "topology" }), 4, 4, 2, E))).toMatch(/^moe.topology: placement "topology" needs moe.topology/);
    const short = join(dir, "short.json");
    writeFileSync(short, JSON.stringify({ groups: [[0, 1], [2]] }));
    expect(issue(() => placementInputs(cfg({ placement: "topology", topology: short }), 4, 4, 2, E))).toMatch(/^moe.topology: .*does not cover ranks 3/);
    const uneven = join(dir, "uneven.json");
    writeFileSync(uneven, JSON.stringify({ groups: [[0, 1, 2], [3]] }));
    expect(issue(() => placementInputs(cfg({ placement: "topology", topology: uneven }), 4, 4, 2, E))).toMatch(/^moe.topology: .*unequal sizes/);
    const unknown = join(dir, "unknown.json");
    writeFileSync(unknown, JSON.stringify({ groups: [[0, 1], [2, 9]] }));
    expect(issue(() => placementInputs(cfg({ placement: "topology", topology: unknown }), 4, 4, 2, E))).toMatch(/^moe.topology: .*names rank 9/);
    expect(issue(() => placementInputs(cfg({ topology: join(dir, "absent.json") }), 4, 4, 2, E))).toMatch(/^moe.topology: cannot read/);
    const wrong = join(dir, "wrong.json");
    writeFileSync(wrong, JSON.stringify({ moe: { expert_pairs: [[[0]], []] } }));
    expect(issue(() => placementInputs(cfg({ placement: "co_occurrence", routing_log: wrong }), 4, 4, 2, E))).toMatch(/^moe.routing_log: .*expert_pairs\[0\]: expected 8×8/);
    const empty = join(dir, "empty.json");
    writeFileSync(empty, "{}");
    expect(issue(() => placementInputs(cfg({ placement: "co_occurrence", routing_log: empty }), 4, 4, 2, E))).toMatch(/^moe.routing_log: .*has no moe.expert_pairs/);
  });
});
