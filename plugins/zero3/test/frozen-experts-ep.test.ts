/**
 * Frozen experts under expert parallelism at world 4, ZeRO-2 and ZeRO-3 (the bucketed reducer,
 * plugins/zero2/src/bucketed-reducer.ts), contiguous placement, 3 steps, experts frozen with the
 * job's `freeze` (core/src/engine/freeze.ts): experts 0 and 2 at ep_size 2 (edp groups of 2 ranks;
 * every rank holds one frozen expert per layer) and at ep_size 4 (ranks 0, 2 hold only frozen
 * experts), and experts 0 and 1 at ep_size 2 (the ranks of EP slot 0 hold only frozen experts).
 * Every rank must issue the same collectives in the same order although some ranks see no expert
 * gradient in a layer; before the fix the dense bucket's reduce_scatter was closed by an expert's
 * gradient on the ranks holding trainable experts only, so it met the layer's dispatch all_to_all_v
 * of the others (a mismatch at ep_size 4, a hang at ep_size 2). The launch's communicator timeout
 * turns a hang into a failure.
 *
 * Expected (core/test/engine/equivalence.test.ts, fp32 with one micro-batch per rank: the ZeRO
 * stages reproduce each other; core/test/engine/freeze.test.ts: the stages agree with frozen units):
 * losses and parameters within 1e-5 of the ZeRO-1 run of the same job (the stated fp32 tolerance),
 * the frozen experts' parameters bit-identical to their initial values, every trainable one moved.
 */
import { beforeAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { FIXTURE_ENTRY, launch, tinyJob, type TrainArgs, type TrainOut } from "@zeromoe/core/testing";

const WORLD = 4;
const STEPS = 3;
const TOL = 1e-5;
const MODEL = {
  model_type: "mixtral", vocab_size: 257, hidden_size: 25, head_dim: 6, intermediate_size: 7, num_hidden_layers: 2,
  num_attention_heads: 3, num_key_value_heads: 1, num_local_experts: 4, num_experts_per_tok: 2,
  max_position_embeddings: 32, router_aux_loss_coef: 0.02, output_router_logits: true,
};

const job = (stage: number, ep: number, freeze: string[]): Record<string, unknown> =>
  tinyJob({
    model: MODEL,
    zero_optimization: { stage, stage3_param_persistence_threshold: 0, reduce_bucket_size: 3000 },
    moe: { ep_size: ep },
    freeze,
  });

/** Every rank's parameters merged (each rank returns its own experts; replicas must agree). */
function merged(rs: TrainOut[]): Record<string, number[]> {
  const m: Record<string, number[]> = {};
  for (const r of rs) for (const [k, v] of Object.entries(r.params)) {
    if (m[k]) expect(v).toEqual(m[k]!);
    m[k] = v;
  }
  return m;
}

function maxAbs(a: Record<string, number[]>, b: Record<string, number[]>): number {
  let d = 0;
  for (const [k, v] of Object.entries(a)) {
    const w = b[k];
    if (!w || w.length !== v.length) throw new Error(`parameter ${k} missing or of another length`);
    for (let i = 0; i < v.length; i++) d = Math.max(d, Math.abs(v[i]! - w[i]!));
  }
  return d;
}

/** A freeze set: which experts (of every layer) are frozen. */
interface Case { ep: number; experts: number[] }
const CASES: Case[] = [
  { ep: 2, experts: [0, 2] }, // every EP slot holds one frozen expert per layer
  { ep: 4, experts: [0, 2] }, // ranks 0, 2 hold only frozen experts, ranks 1, 3 only trainable ones
  { ep: 2, experts: [0, 1] }, // ranks of EP slot 0 hold only frozen experts
];
const STAGES = [1, 2, 3];
const freezeOf = (c: Case): string[] => c.experts.map((e) => `model.layers.*.block_sparse_moe.experts.${e}.*`);
const frozenName = (c: Case) => (name: string): boolean => c.experts.some((e) => name.includes(`.experts.${e}.`));
const label = (c: Case): string => `ep_size ${c.ep}, experts ${c.experts.join(" and ")} frozen`;

let init: Record<string, number[]>;
/** res[case][stage index][rank] */
let res: TrainOut[][][] = [];

beforeAll(async () => {
  const runs: TrainArgs[] = [{ job: job(1, 1, []), steps: 0 }];
  for (const c of CASES) for (const s of STAGES) runs.push({ job: job(s, c.ep, freezeOf(c)), steps: STEPS });
  // the communicator's timeout turns a mismatched collective sequence (a hang) into a failure
  const out = await launch<TrainOut[]>({ worldSize: WORLD, entry: FIXTURE_ENTRY, args: { runs }, timeoutS: 120 });
  init = merged(out.map((r) => r[0]!));
  res = CASES.map((_, ci) => STAGES.map((_, si) => out.map((r) => r[1 + ci * STAGES.length + si]!)));
}, 300_000);

describe("frozen experts at world 4 (edp groups of several ranks at ep_size 2)", () => {
  CASES.forEach((c, ci) => {
    const isFrozen = frozenName(c);
    test(`${label(c)}, ZeRO-1 reference: frozen experts unchanged, trainable parameters moved`, () => {
      const p = merged(res[ci]![0]!);
      const names = Object.keys(init);
      expect(names.filter(isFrozen).length).toBe(c.experts.length * 2 * 3);
      for (const n of names) {
        if (isFrozen(n)) expect(p[n]).toEqual(init[n]!);
        else expect(p[n]).not.toEqual(init[n]!);
      }
      expect(res[ci]![0]![0]!.losses[STEPS - 1]!).toBeLessThan(res[ci]![0]![0]!.losses[0]!);
    });

    for (const stage of [2, 3]) {
      test(`${label(c)}, ZeRO-${stage}: losses and parameters match ZeRO-1 within ${TOL}; frozen experts unchanged`, () => {
        const ref = res[ci]![0]!;
        const got = res[ci]![STAGES.indexOf(stage)]!;
        expect(got[0]!.losses.length).toBe(STEPS);
        for (let r = 0; r < WORLD; r++) for (let s = 0; s < STEPS; s++) expect(Math.abs(got[r]!.losses[s]! - ref[0]!.losses[s]!)).toBeLessThan(TOL);
        const p = merged(got);
        expect(Object.keys(p).sort()).toEqual(Object.keys(init).sort());
        expect(maxAbs(merged(ref), p)).toBeLessThan(TOL);
        for (const n of Object.keys(init).filter(isFrozen)) expect(p[n]).toEqual(init[n]!);
        expect(got[0]!.logs.join("\n")).toContain(`freeze: ${2 * c.experts.length} units frozen`);
      });
    }
  });
});
