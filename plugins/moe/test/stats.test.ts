/**
 * MoE statistics (stats.ts): reduction over the dp group (Σ counts = tokens × k per layer,
 * identical on every rank), the compact log line, dead-expert warnings after `dead_expert_steps`,
 * the `--summary` section, and the Hugging Face Mixtral aux formula from per-layer records; plus
 * the config errors for ep_size constraints, which name the numbers.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { createSoloCommunicator } from "@zeromoe/core/comm";
import { resolveJobConfig } from "@zeromoe/core/config";
import { launch } from "@zeromoe/core/launch";
import { MoEStatsRecorder, formatLoadLine, loadSummary, mixtralAux, summarySection, type GateRecord } from "../src/index.ts";
import { TRAIN_ENTRY, tinyMoeJob, type RunOut } from "./fixtures/train-entry.ts";

function rec(layer: number, counts: number[], over: Partial<GateRecord> = {}): GateRecord {
  return { layer, tokens: counts.reduce((a, b) => a + b, 0) / 2, counts: Int32Array.from(counts), dropped: 0, probMean: Float64Array.from(counts.map(() => 1 / counts.length)), aux: null, zLoss: null, ...over };
}

describe("statistics", () => {
  test("load summary and the compact log line", () => {
    const s = loadSummary([4, 0, 8, 4]);
    expect(s).toEqual({ min: 0, max: 8, cv: Math.sqrt(8) / 4, dead: 1 });
    expect(loadSummary([3, 3, 3]).cv).toBe(0);
    const line = formatLoadLine({ step: 0, layers: [{ layer: 0, counts: [4, 0, 8, 4], tokens: 8, dropped: 2, ...s }, { layer: 1, counts: [4, 4, 4, 4], tokens: 8, dropped: 1, ...loadSummary([4, 4, 4, 4]) }], auxLoss: 1.25, zLoss: null, warnings: [] });
    expect(line).toBe("moe L0 0/8 cv0.71 dead1 | L1 4/4 cv0.00 dead0 | drop 3 aux 1.2500");
  });

  test("dead-expert warning after dead_expert_steps steps without tokens, once until it gets tokens", async () => {
    const comm = createSoloCommunicator();
    const r = new MoEStatsRecorder(1, 3, 2, "switch", 2);
    const steps = [[2, 2, 0], [3, 1, 0], [2, 2, 0], [1, 1, 2], [2, 2, 0], [4, 0, 0]];
    const warnings: string[][] = [];
    for (const c of steps) {
      r.observe(rec(0, c, { aux: 1 }));
      warnings.push((await r.reduceStep(comm, comm.world)).warnings);
    }
    expect(warnings[0]).toEqual([]);
    expect(warnings[1]).toEqual(["moe: expert 2 of layer 0 received no tokens for 2 steps (steps 0..1)"]);
    expect(warnings[2]).toEqual([]);
    expect(warnings[3]).toEqual([]);
    expect(warnings[4]).toEqual([]);
    expect(warnings[5]).toEqual(["moe: expert 2 of layer 0 received no tokens for 2 steps (steps 4..5)"]);
    const sum = summarySection(r.totals);
    expect(r.cumulativeCounts()).toEqual([[14, 8, 2]]);
    expect(r.last!.layers[0]!.counts).toEqual([4, 0, 0]);
    expect(sum.steps).toBe(6);
    expect(sum.layers[0]!.counts).toEqual([14, 8, 2]);
    expect(sum.auxLoss).toBe(1);
    expect(sum.warnings.length).toBe(2);
  });

  test("a sparse family's dense layers (mlp_only_layers, first_k_dense_replace) get no statistics rows", async () => {
    const comm = createSoloCommunicator();
    // 3 layers, layer 0 dense; dead_expert_steps 1: only a MoE layer's idle expert may warn
    const r = new MoEStatsRecorder(3, 4, 2, "switch", 1, [1, 2]);
    r.observe(rec(1, [2, 2, 2, 2], { aux: 1 }));
    r.observe(rec(2, [4, 4, 0, 0], { aux: 3 }));
    const s = await r.reduceStep(comm, comm.world);
    expect(s.layers.map((l) => l.layer)).toEqual([1, 2]);
    expect(formatLoadLine(s)).toBe("moe L1 2/2 cv0.00 dead0 | L2 0/4 cv1.00 dead2 | drop 0 aux 2.0000");
    expect(s.warnings).toEqual(["moe: expert 2 of layer 2 received no tokens for 1 steps (steps 0..0)", "moe: expert 3 of layer 2 received no tokens for 1 steps (steps 0..0)"]);
    const sum = summarySection(r.totals);
    expect(sum.layers.map((l) => l.layer)).toEqual([1, 2]);
    expect(sum.auxLoss).toBe(2); // averaged over the 2 MoE layers, not 3
    expect(() => r.observe(rec(0, [1, 1, 1, 1]))).toThrow("layer 0 has no experts");
    // Mixtral's all-layer aux over the MoE layers only, when the last layer is dense
    const m = new MoEStatsRecorder(3, 4, 2, "mixtral", 0, [0, 1]);
    const a = rec(0, [3, 1, 2, 0], { probMean: Float64Array.from([0.4, 0.1, 0.3, 0.2]) });
    const b = rec(1, [1, 1, 1, 3], { probMean: Float64Array.from([0.1, 0.2, 0.3, 0.4]) });
    m.observe(a);
    m.observe(b);
    expect((await m.reduceStep(comm, comm.world)).auxLoss).toBeCloseTo(mixtralAux([a, b], 4), 12);
  });

  test("mixtral aux from per-layer records = HF's all-layer formula", () => {
    const a = rec(0, [3, 1, 2, 0], { probMean: Float64Array.from([0.4, 0.1, 0.3, 0.2]) });
    const b = rec(1, [1, 1, 1, 3], { probMean: Float64Array.from([0.1, 0.2, 0.3, 0.4]) });
    // E · Σ_e (n_e / (L·T)) · mean_l P_le with T = 3, L = 2
    const n = [4, 2, 3, 3].map((x) => x / 6);
    const p = [0.25, 0.15, 0.3, 0.3];
    expect(mixtralAux([a, b], 4)).toBeCloseTo(4 * n.reduce((s, v, e) => s + v * p[e]!, 0), 12);
  });

  test("ep_size constraints are config errors naming the numbers", () => {
    const err = (job: Record<string, unknown>) => {
      try {
        resolveJobConfig(job);
        return "";
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(err(tinyMoeJob({ world_size: 6, moe: { ep_size: 3 } }))).toMatch(/num_local_experts 4 is not divisible by ep_size 3/);
    expect(err(tinyMoeJob({ world_size: 6, moe: { ep_size: 4 } }))).toMatch(/world_size 6 is not divisible by ep_size 4/);
  });
});

describe("statistics in training (world 4, ep_size 2, capacity drops)", async () => {
  const res = await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: 2, job: tinyMoeJob({ moe: { ep_size: 2, drop_tokens: true, capacity_factor: 0.5, min_capacity: 1, aux_loss: "switch", z_loss_coef: 1e-3 } }) }] } }) as unknown as RunOut[][];
  test("identical on every rank; Σ counts = tokens × k; drops, aux and z reported", () => {
    const outs = res.map((r) => r[0]!);
    for (const o of outs) expect(o.stats).toEqual(outs[0]!.stats);
    for (const s of outs[0]!.stats) {
      for (const l of s.layers) {
        expect(l.tokens).toBe(4 * 2 * 7);
        expect(l.counts.reduce((a, b) => a + b, 0)).toBe(4 * 2 * 7 * 2);
        expect(l.dropped).toBeGreaterThan(0);
      }
      expect(s.auxLoss).toBeGreaterThan(0.5);
      expect(s.zLoss).toBeGreaterThan(0);
      expect(formatLoadLine(s)).toMatch(/^moe L0 \d+\/\d+ cv\d\.\d\d dead\d+ \| L1 .* \| drop \d+ aux \d\.\d{4} z \d\.\d{4}$/);
    }
  });
});
