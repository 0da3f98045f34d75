/**
 * Live expert re-placement (live-replace.ts, `moe.replace_every`): at world 4, ep 4 and ep 2, ZeRO-1,
 * 2 and 3 (bf16 with fp32 masters in three cases, 2 micro-batches per step in one), a job that
 * re-places after step 3 of 6 equals, bit for bit in losses and final parameters, the same job
 * stopped after step 3 (checkpoint) and resumed with the placement the live run chose; the all_to_all_v sends exactly the states of the
 * experts that change rank (byte count worked out here from the ZeRO layouts); the summary and the
 * log say each re-placement. A re-placing job stopped and resumed equals the uninterrupted one.
 * Plus the move list on a hand-made example, the placement computations and the config errors.
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { resolveJobConfig } from "@zeromoe/core/config";
import { balancedPlacement, contiguousPlacement, expertMoves, placementComputer } from "../src/index.ts";
import { tinyMoeJob } from "./fixtures/train-entry.ts";
import { LIVE_ENTRY, type LiveOut, type LiveRun } from "./fixtures/live-entry.ts";

describe("expertMoves", () => {
  test("lists the experts whose rank changes, by layer then expert", () => {
    const a = [contiguousPlacement(4, 2), contiguousPlacement(4, 2)];
    const b = [balancedPlacement(4, 2, [9, 8, 1, 2]), contiguousPlacement(4, 2)]; // owner [0, 1, 0, 1]
    expect(expertMoves(a, b)).toEqual([{ layer: 0, expert: 1, from: 0, to: 1 }, { layer: 0, expert: 2, from: 1, to: 0 }]);
    expect(expertMoves(a, a)).toEqual([]);
  });
});

describe("placement computations (ComputePlacement)", () => {
  test("balanced re-packs by the loads; co_occurrence puts the planted pairs on one rank; static strategies have none", () => {
    const E = 4;
    // pairs (0, 3) and (1, 2) chosen together far more often than any other pair
    const pairs = new Float64Array(E * E);
    const put = (a: number, b: number, w: number) => { pairs[a * E + b] = w; pairs[b * E + a] = w; };
    put(0, 3, 50); put(1, 2, 40); put(0, 1, 1); put(2, 3, 2);
    const base = { step: 3, numLayers: 1, numExperts: E, epSize: 2, loads: [[10, 10, 10, 10]], current: [contiguousPlacement(E, 2)] };
    const co = placementComputer("co_occurrence")!({ ...base, graph: { pairs: [pairs] } })[0]!;
    expect(co.owner[0]).toBe(co.owner[3]!);
    expect(co.owner[1]).toBe(co.owner[2]!);
    expect(expertMoves(base.current, [co]).length).toBe(2);
    expect(Array.from(placementComputer("balanced")!({ ...base, loads: [[9, 8, 1, 2]], graph: null })[0]!.owner)).toEqual([0, 1, 0, 1]);
    expect(placementComputer("contiguous")).toBeNull();
    expect(placementComputer("round_robin")).toBeNull();
  });
});

describe("moe.replace_every config errors name the key", () => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ moe: { ep_size: 2, replace_every: 3 } }, /moe\.replace_every.*needs a placement that can change/],
    [{ moe: { ep_size: 2, placement: "round_robin", replace_every: 3 } }, /moe\.replace_every.*"round_robin" always gives the same placement/],
    [{ moe: { ep_size: 1, placement: "balanced", replace_every: 3 } }, /moe\.replace_every.*needs moe\.ep_size ≥ 2/],
    [{ moe: { ep_size: 2, placement: "balanced", replace_every: -1 } }, /moe\.replace_every/],
    [{ moe: { ep_size: 2, placement: "balanced", replace_every: 1.5 } }, /moe\.replace_every/],
  ];
  for (const [over, re] of bad) {
    test(JSON.stringify(over), () => {
      expect(() => resolveJobConfig({ ...tinyMoeJob(over), world_size: 4 })).toThrow(re);
    });
  }
  test("0 (off) with any placement, and N with balanced, are accepted", () => {
    expect(resolveJobConfig({ ...tinyMoeJob({ moe: { ep_size: 2, replace_every: 0 } }), world_size: 4 }).config.moe!.replace_every).toBe(0);
    expect(resolveJobConfig({ ...tinyMoeJob({ moe: { ep_size: 2, placement: "balanced", replace_every: 3 } }), world_size: 4 }).config.moe!.replace_every).toBe(3);
  });
});

/** Bytes one edp member sends for one moving expert of `numel` elements (independent of the code:
 * the ZeRO layouts of docs/domain.md §1 — stage 1: params and grads whole, optimizer sharded;
 * stage 2: params whole; stage 3: all sharded; shards of ceil(numel / D)). */
function expertBytes(numel: number, stage: number, D: number, bf16: boolean): number {
  const s = Math.ceil(numel / D);
  const pb = bf16 ? 2 : 4;
  const params = (stage === 3 ? s : numel) * pb;
  const grads = (stage >= 2 ? s : numel) * pb;
  const optim = s * 4 * (bf16 ? 3 : 2);
  return params + grads + optim;
}

const cases = [
  { ep: 4, stage: 1, bf16: false },
  { ep: 2, stage: 2, bf16: true },
  { ep: 4, stage: 3, bf16: false },
  { ep: 2, stage: 3, bf16: true },
  // 16-bit gradients added straight into the whole accumulator (unit.gradInto) over 2 micro-batches
  { ep: 2, stage: 1, bf16: true, accum: 2 },
  // frozen experts move their parameters only (no gradient, no optimizer state); ZeRO-1 because
  // ZeRO-2/3 with frozen experts under ep > 1 mismatch collectives even without re-placement
  { ep: 4, stage: 1, bf16: false, freeze: ["model.layers.*.block_sparse_moe.experts.0.*", "model.layers.*.block_sparse_moe.experts.2.*"] },
] as { ep: number; stage: number; bf16: boolean; accum?: number; freeze?: string[] }[];

for (const c of cases) {
  describe(`live re-placement at world 4, ep ${c.ep}, ZeRO-${c.stage}${c.bf16 ? ", bf16" : ""}${c.accum ? `, ${c.accum} micro-batches` : ""}${c.freeze ? ", experts 0 and 2 frozen" : ""}`, async () => {
    const zero = { stage: c.stage, ...(c.stage === 3 ? { stage3_param_persistence_threshold: 0 } : {}) };
    const job = (every: number) => tinyMoeJob({ moe: { ep_size: c.ep, placement: "balanced", replace_every: every }, zero_optimization: zero, ...(c.bf16 ? { bf16: { enabled: true } } : {}), ...(c.accum ? { gradient_accumulation_steps: c.accum } : {}), ...(c.freeze ? { freeze: c.freeze } : {}) });
    const runs: LiveRun[] = [
      { job: job(3), steps: 6 },
      { job: job(0), steps: 3, save: true },
      { job: job(0), steps: 3, resume: true },
    ];
    const res = (await launch<LiveOut[]>({ worldSize: 4, entry: LIVE_ENTRY, args: { runs } })) as unknown as LiveOut[][];
    const [live, stop, resumed] = [0, 1, 2].map((i) => res.map((r) => r[i]!));
    const merged = (outs: LiveOut[]) => Object.assign({}, ...outs.map((o) => o.params)) as Record<string, number[]>;
    const rep = live[0]!.summary.replacements!;

    test("the re-placement after step 3 moves experts; the resumed job holds the placement the live one chose", () => {
      expect(rep.map((r) => r.step)).toEqual([3, 6]);
      expect(rep[0]!.experts_moved).toBeGreaterThan(0);
      expect(resumed[0]!.owner).not.toEqual(stop[0]!.owner);
      // the live run's placement after step 3 = the resumed run's (balanced from the loads of steps 1–3)
      const moved = new Map(rep[0]!.moves.map((m) => [m.split(" ")[0]!, Number(m.split("→")[1])]));
      stop[0]!.owner.forEach((row, l) => row.forEach((j, e) => expect(resumed[0]!.owner[l]![e]).toBe(moved.get(`${l}:${e}`) ?? j)));
    });

    test("losses and final parameters equal stop + resume bit for bit", () => {
      expect(live[0]!.losses.slice(0, 3)).toEqual(stop[0]!.losses);
      expect(live[0]!.losses.slice(3)).toEqual(resumed[0]!.losses);
      const a = merged(live);
      const b = merged(resumed);
      expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
      for (const k of Object.keys(b)) expect(a[k]).toEqual(b[k]!);
    });

    test("the all_to_all_v sends exactly the states of the experts that change rank", () => {
      const D = 4 / c.ep;
      // expert numel of the tiny model: w1, w3 [7, 25] and w2 [25, 7]
      const numel = 3 * 7 * 25;
      // a frozen expert keeps its parameters only, whole (stage ≤ 2) or sharded (stage 3)
      const frozen = (m: string) => c.freeze !== undefined && [0, 2].includes(Number(m.split(" ")[0]!.split(":")[1]));
      const per = (m: string) => (frozen(m) ? (c.stage === 3 ? Math.ceil(numel / D) : numel) * (c.bf16 ? 2 : 4) : expertBytes(numel, c.stage, D, c.bf16));
      if (c.freeze) expect(rep[0]!.moves.some(frozen) && rep[0]!.moves.some((m) => !frozen(m))).toBe(true);
      let total = 0;
      live.forEach((o, rank) => {
        const fromMe = rep[0]!.moves.filter((m) => Number(m.split(" ")[1]!.split("→")[0]) === rank % c.ep);
        const want = fromMe.reduce((a, m) => a + per(m), 0);
        expect(o.afterStepA2ABytes[2]).toBe(want);
        total += want;
        for (const s of [0, 1, 3, 4]) expect(o.afterStepA2ABytes[s]).toBe(0);
      });
      expect(rep[0]!.bytes).toBe(total);
      expect(total).toBe(rep[0]!.moves.reduce((a, m) => a + D * per(m), 0));
      // each rank holds exactly the experts its EP rank owns
      live.forEach((o, rank) => {
        const experts = o.held.filter((n) => n.includes("experts"));
        expect(experts.length).toBe((2 * 4) / c.ep);
        for (const n of experts) {
          const [, l, e] = /layers\.(\d+)\.experts\.(\d+)/.exec(n)!;
          expect(o.owner[Number(l)]![Number(e)]).toBe(rank % c.ep);
        }
      });
    });

    test("the log says each re-placement (step, experts moved, bytes)", () => {
      const lines = live[0]!.logs.filter((l) => l.startsWith("moe: live re-placement after step "));
      expect(lines.length).toBe(2); // steps 3 and 6, once each
      const line = lines[0]!;
      expect(line).toStartWith("moe: live re-placement after step 3:");
      expect(line).toContain(`${rep[0]!.experts_moved} expert`);
      expect(line).toContain(`${rep[0]!.bytes} bytes`);
    });
  });
}

describe("a re-placing job stopped and resumed equals the uninterrupted one (world 4, ep 2, ZeRO-2, bf16)", async () => {
  // replace_every 2: the uninterrupted job re-places after steps 2, 4 and 6; the stopped one after
  // step 2, saves after 3, and resumed keeps its placement and loads and re-places after 4 and 6
  const job = tinyMoeJob({ moe: { ep_size: 2, placement: "balanced", replace_every: 2 }, zero_optimization: { stage: 2 }, bf16: { enabled: true } });
  const runs: LiveRun[] = [{ job, steps: 6 }, { job, steps: 3, save: true }, { job, steps: 3, resume: true }];
  const res = (await launch<LiveOut[]>({ worldSize: 4, entry: LIVE_ENTRY, args: { runs } })) as unknown as LiveOut[][];
  const [whole, stop, resumed] = [0, 1, 2].map((i) => res.map((r) => r[i]!));
  test("same re-placements, losses, final placement and parameters bit for bit", () => {
    const rw = whole[0]!.summary.replacements!;
    expect(rw.map((r) => r.step)).toEqual([2, 4, 6]);
    expect(rw.some((r) => r.experts_moved > 0)).toBe(true);
    const rs = [...stop[0]!.summary.replacements!, ...resumed[0]!.summary.replacements!];
    expect(rs).toEqual(rw);
    expect([...stop[0]!.losses, ...resumed[0]!.losses]).toEqual(whole[0]!.losses);
    expect(resumed[0]!.owner).toEqual(whole[0]!.owner);
    const a = Object.assign({}, ...whole.map((o) => o.params)) as Record<string, number[]>;
    const b = Object.assign({}, ...resumed.map((o) => o.params)) as Record<string, number[]>;
    for (const k of Object.keys(a)) expect(b[k]).toEqual(a[k]!);
  });
});
