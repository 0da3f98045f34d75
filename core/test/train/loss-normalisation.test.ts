/**
 * The training loss of masked data (chat: labels −100 outside the assistant turns) is normalised by
 * the scored labels of the whole global batch (engine.ts tokenLossWeights), as Transformers does
 * since its 2024 gradient-accumulation fix: one step's gradient is that of Σ(token losses) / N, N
 * counted over every micro-batch of every rank. So how the global batch is cut — micro-batch size,
 * gradient_accumulation_steps, world size — does not change the step.
 *
 * The reference is the definition itself: world 1, one micro-batch holding all 8 rows, whose model
 * loss is the mean over all scored labels. Each cut is compared with it after 2 AdamW steps: losses
 * and gradient norms within 1e-6 relative, parameters within 1e-6 absolute (f32 sums in other
 * orders; AdamW's first steps move an element by ≈ lr = 1e-2 whatever the gradient's scale, so the
 * gradient norm is the scale-sensitive check). The rows score 1..4 labels each (masks of varying
 * length), so a per-micro-batch mean — the old normalisation — fails the check (shown).
 * Masked positions never contribute: replacing the input ids under the trailing mask (no scored
 * position attends to them) leaves everything bit-identical.
 * Models: a dense llama (awkward sizes) at ZeRO-0 and ZeRO-3, and the awkward mixtral with its
 * aux loss off (a load-balancing loss is a per-micro-batch statistic, not a token sum).
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { launch } from "../../src/launch/index.ts";
import { tokenLossWeights } from "../../src/engine/engine.ts";
import { awkwardModel, tinyJob } from "../../src/testing.ts";
import { MASKED_ENTRY, type MaskedArgs, type MaskedOut } from "./masked-rank.ts";

const ROWS = 8;
const STEPS = 2;
const LLAMA = {
  model_type: "llama", vocab_size: 257, hidden_size: 25, head_dim: 6, intermediate_size: 13, num_hidden_layers: 2,
  num_attention_heads: 3, num_key_value_heads: 1, max_position_embeddings: 32,
};
const MODELS: Record<string, { model: Record<string, unknown>; extra: Record<string, unknown> }> = {
  llama: { model: LLAMA, extra: {} },
  mixtral: { model: awkwardModel(), extra: { moe: { aux_loss_coef: 0 } } },
};
/** [world, accum, micro] with world·accum·micro = ROWS. */
const CUTS: [number, number, number][] = [[1, 8, 1], [1, 4, 2], [2, 2, 2], [4, 1, 2], [2, 4, 1]];

function job(model: string, stage: number, accum: number, micro: number): Record<string, unknown> {
  return tinyJob({
    model: MODELS[model]!.model,
    ...MODELS[model]!.extra,
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 7 },
    train_micro_batch_size_per_gpu: micro,
    gradient_accumulation_steps: accum,
    optimizer: { type: "AdamW", params: { lr: 1e-2, weight_decay: 0 } },
    zero_optimization: { stage, stage3_param_persistence_threshold: 0 },
  });
}

const results = new Map<string, MaskedOut>();
const key = (m: string, stage: number, w: number, a: number, mi: number, flip = false) => `${m}/${stage}/${w}/${a}/${mi}${flip ? "/flip" : ""}`;

beforeAll(async () => {
  const byWorld = new Map<number, MaskedArgs[]>();
  const add = (w: number, a: MaskedArgs) => byWorld.set(w, [...(byWorld.get(w) ?? []), a]);
  for (const m of Object.keys(MODELS)) {
    for (const stage of m === "llama" ? [0, 3] : [0]) {
      add(1, { job: job(m, stage, 1, ROWS), steps: STEPS, rows: ROWS, label: key(m, stage, 1, 1, ROWS) });
      for (const [w, a, mi] of CUTS) add(w, { job: job(m, stage, a, mi), steps: STEPS, rows: ROWS, label: key(m, stage, w, a, mi) });
    }
  }
  add(2, { job: job("llama", 0, 2, 2), steps: STEPS, rows: ROWS, flipMasked: true, label: key("llama", 0, 2, 2, 2, true) });
  for (const [w, runs] of byWorld) {
    const res = await launch<MaskedOut[]>({ worldSize: w, entry: MASKED_ENTRY, args: { runs } });
    for (const r of res[0]!) results.set(r.label!, r);
  }
}, 300_000);

function maxAbsDiff(a: Record<string, number[]>, b: Record<string, number[]>): number {
  let worst = 0;
  for (const [k, v] of Object.entries(a)) v.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - b[k]![i]!))));
  return worst;
}

describe("loss normalised over the whole global batch", () => {
  for (const m of Object.keys(MODELS)) {
    for (const stage of m === "llama" ? [0, 3] : [0]) {
      test(`${m}, ZeRO-${stage}: every cut of the global batch equals one micro-batch of all rows (1e-6)`, () => {
        const ref = results.get(key(m, stage, 1, 1, ROWS))!;
        expect(ref.losses[1]!).toBeLessThan(ref.losses[0]!);
        for (const [w, a, mi] of CUTS) {
          const o = results.get(key(m, stage, w, a, mi))!;
          o.losses.forEach((l, i) => expect(Math.abs(l - ref.losses[i]!) / ref.losses[i]!).toBeLessThanOrEqual(1e-6));
          o.gradNorms.forEach((g, i) => expect(Math.abs(g - ref.gradNorms[i]!) / ref.gradNorms[i]!).toBeLessThanOrEqual(1e-6));
          expect(maxAbsDiff(o.params, ref.params)).toBeLessThanOrEqual(1e-6);
        }
      });
    }
  }

  test("the check is discriminative: per-micro-batch means would give another gradient", () => {
    // micro-batch weights of the [1, 8, 1] cut: n_i·8/N, far from the uniform 1 of a mean of means
    const counts = Array.from({ length: ROWS }, (_, r) => {
      const prompt = 1 + ((r * 5) % 6);
      const end = Math.min(7, prompt + 1 + ((r * 3) % 4));
      return end - prompt; // scored: labels at positions prompt … end − 1 (maskedRows)
    });
    const w = tokenLossWeights(counts, counts.reduce((a, b) => a + b, 0), 1);
    expect(Math.max(...w) - Math.min(...w)).toBeGreaterThan(0.5);
  });

  test("masked input ids that no scored position sees never contribute: bit-identical", () => {
    const a = results.get(key("llama", 0, 2, 2, 2))!;
    const b = results.get(key("llama", 0, 2, 2, 2, true))!;
    expect(b.losses).toEqual(a.losses);
    expect(b.gradNorms).toEqual(a.gradNorms);
    expect(b.params).toEqual(a.params);
  });

  test("uniform counts (plain text) give weights of exactly 1: those jobs are unchanged", () => {
    expect(tokenLossWeights([6, 6, 6], 36, 2)).toEqual([1, 1, 1]);
    expect(tokenLossWeights([4095 * 7, 4095 * 7], 4095 * 7 * 8, 4)).toEqual([1, 1]);
    expect(tokenLossWeights([0, 0], 0, 1)).toEqual([0, 0]);
  });
});
