/**
 * The example third-party plugin: its estimator against a closed-form case, and a real job (ZeRO-3
 * and data parallel, 2 ranks) loading it from the config's `plugins` list: training is bit-identical
 * to the same job without it, the reported |G| equals the engine's global gradient norm, and with a
 * single micro-batch in total the micro-batch and averaged gradients coincide.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { awkwardModel, FIXTURE_ENTRY, launch, tinyJob, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";
import { noiseScale } from "../src/index.ts";

const PLUGIN = new URL("../src/index.ts", import.meta.url).pathname;
const STEPS = 2;

describe("noiseScale (McCandlish et al. 2018, App. A.1)", () => {
  test("recovers tr(Σ)/|G|² from E|g_B|² = |G|² + tr(Σ)/B", () => {
    for (const [g2, tr, bs, bb] of [[2, 10, 2, 8], [0.3, 7, 1, 13], [5, 0.5, 3, 12]] as const) {
      const small = g2 + tr / bs;
      const big = g2 + tr / bb;
      expect(noiseScale(small, big, bs, bb)).toBeCloseTo(tr / g2, 10);
    }
    expect(noiseScale(1, 1, 4, 4)).toBeNaN();
  });
});

function job(stage: number, accum: number, plugin: boolean): Record<string, unknown> {
  return tinyJob({
    model: awkwardModel(),
    gradient_accumulation_steps: accum,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0 },
    plugins: plugin ? [PLUGIN] : [],
  });
}

/** Parse "grad-noise step k: |G|=x |g_micro|=y B_simple=z …". */
function parse(line: string): { step: number; g: number; micro: number; b: number } {
  const m = /grad-noise step (\d+): \|G\|=(\S+) \|g_micro\|=(\S+) B_simple=(\S+)/.exec(line);
  if (!m) throw new Error(`unexpected log line: ${line}`);
  return { step: Number(m[1]), g: Number(m[2]), micro: Number(m[3]), b: Number(m[4]) };
}

let res: TrainOut[][] = [];
let single: TrainOut[][] = [];

beforeAll(async () => {
  const runs: TrainArgs[] = [];
  for (const stage of [3, 0]) for (const p of [true, false]) runs.push({ job: job(stage, 2, p), steps: STEPS });
  res = await launch<TrainOut[]>({ worldSize: 2, entry: FIXTURE_ENTRY, args: { runs } });
  single = await launch<TrainOut[]>({ worldSize: 1, entry: FIXTURE_ENTRY, args: { runs: [{ job: job(3, 1, true), steps: 1 }] } });
}, 60_000);

describe("grad-noise in a job", () => {
  for (const [i, stage] of [[0, 3], [2, 0]] as const) {
    test(`stage ${stage}, world 2: wraps reduce, changes nothing, logs |G| = the engine's gradient norm`, () => {
      const [withP, without] = [res[0]![i]!, res[0]![i + 1]!];
      expect(withP.owners.reduce).toBe(stage === 3 ? "zero3+grad-noise" : "core+grad-noise");
      expect(withP.params).toEqual(without.params);
      expect(withP.losses).toEqual(without.losses);
      const lines = withP.logs.filter((l) => l.startsWith("grad-noise"));
      expect(lines.length).toBe(STEPS);
      expect(res[1]![i]!.logs.filter((l) => l.startsWith("grad-noise")).length).toBe(0); // rank 1 stays quiet
      lines.map(parse).forEach((s, k) => {
        expect(s.step).toBe(k + 1);
        expect(Math.abs(s.g / withP.gradNorms[k]! - 1)).toBeLessThan(1e-3); // 4 significant digits logged
        expect(s.micro).toBeGreaterThan(s.g); // a micro-batch gradient is noisier than the mean of 4
        expect(Number.isFinite(s.b) || Number.isNaN(s.b)).toBe(true);
      });
      // per-unit norms (3 significant digits logged) make up |G|: Σ |G_u|² = |G|²
      const units = [...lines[0]!.matchAll(/ (embed|head|layers\.[\d.a-z]+)=(\S+)/g)].map((m) => Number(m[2]));
      expect(units.length).toBe(10);
      const g = parse(lines[0]!).g;
      expect(Math.abs(units.reduce((a, x) => a + x * x, 0) / (g * g) - 1)).toBeLessThan(1e-2);
    });
  }

  test("one micro-batch in total: micro-batch norm = averaged norm, B_simple undefined", () => {
    const s = parse(single[0]![0]!.logs.find((l) => l.startsWith("grad-noise"))!);
    expect(s.micro).toBe(s.g);
    expect(s.b).toBeNaN();
  });
});
