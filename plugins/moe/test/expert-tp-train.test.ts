/**
 * Expert tensor parallelism in the engine (moe.etp_size; plugins/moe/src/expert-tp.ts, the
 * dispatcher's etp all_gather / reduce_scatter, sliced expert units): world 4, tiny mixtral with
 * intermediate 8 (4 per etp rank at etp 2, 2 at etp 4), 3 AdamW steps, ZeRO stages 0–3, fp32,
 * against the ep-only run (ep 2, etp 1, same world and stage); and bf16 at stage 3 (ep 2 × etp 2
 * against ep 2 × etp 1) within the bf16 data-parallel tolerance of ep-equivalence.test.ts (RMS
 * |Δθ| ≤ 2e-3, max |Δθ| ≤ 2·lr·steps, losses within 2e-3: bf16 rounding of differently summed values);
 *
 * - losses of every step within 1e-6 (absolute; observed equal) and every parameter within 5e-6
 *   after 3 steps (observed ≤ 1.37e-6) — expert weights assembled from their etp slices (w1/w3
 *   rows, w2 columns). Not bit-identical: the down projection's sum over the intermediate
 *   dimension is split into etp partial sums added by the reduce_scatter, and the input gradient
 *   likewise, which changes f32 rounding; AdamW normalises the tiny gradients of some elements, so
 *   their rounding differences become differences of the update (PARAM_TOL);
 * - per-rank model-state memory (backend accounting of param/grad/optim tags) equals
 *   etpModelStateBytes: exactly per rank at stage 0, Σ over ranks of (measured − padding) = 4 × the
 *   formula when sharded (shards are padded to equal size);
 * - checkpoint ownership: every expert slice unit is written by exactly one rank at stage 0, the
 *   manifest records etp_size; a resume whose etp_size differs is refused naming moe.etp_size;
 * - binding gradient clipping (the global norm counts every slice once) and activation checkpointing
 *   (the recomputation runs the etp collectives again): the same tolerances at ZeRO-3;
 * - qwen3_moe with a dense layer (mlp_only_layers) beside the experts: the same tolerances at ZeRO-2;
 * - config errors name moe.etp_size (world not divisible by ep × etp, intermediate not divisible,
 *   model.from_pretrained with etp_size > 1).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { launch } from "@zeromoe/core/launch";
import { resolveJobConfig } from "@zeromoe/core/config";
import { etpModelStateBytes, gatherExpertSlices } from "../src/expert-tp.ts";
import { TRAIN_ENTRY, tinyMoeJob, tinyMoeModel, type RunArgs, type RunOut } from "./fixtures/train-entry.ts";

const STEPS = 3;
const I = 8;
const H = 25;
const TOL = 1e-6;
/** Parameters after 3 AdamW steps (observed 1.37e-6 at etp 2, 1.5e-7 at etp 4, both in an attention
 * weight: AdamW's update ≈ lr·m/√v normalises an element's tiny gradient, so its rounding
 * difference becomes a difference of the update — ep-equivalence.test.ts states the same effect). */
const PARAM_TOL = 5e-6;
const job = (ep: number, etp: number, stage: number, bf16 = false) => tinyMoeJob({ model: tinyMoeModel({ intermediate_size: I }), moe: { ep_size: ep, etp_size: etp }, bf16: { enabled: bf16 }, zero_optimization: { stage, stage3_param_persistence_threshold: 0 } });
const LAYOUTS: [number, number][] = [[2, 1], [2, 2], [1, 2], [1, 4]];
const STAGES = [0, 1, 2, 3];

/** Full parameters of a run by Hub name: dense ones from any rank, experts assembled from the
 * slices `{name}.etp{j}` of etp ranks j = 0..etp−1. */
function fullParams(outs: RunOut[], etp: number, inter = I, hidden = H): Record<string, number[]> {
  const m: Record<string, number[]> = {};
  const slices = new Map<string, Float32Array[]>();
  for (const o of outs) for (const [k, v] of Object.entries(o.params)) {
    const sl = /^(.*\.experts\.\d+\.(?:w1|w2|w3|gate_proj|up_proj|down_proj)\.weight)\.etp(\d+)$/.exec(k);
    if (!sl) {
      m[k] ??= v;
      continue;
    }
    if (etp === 1) throw new Error(`a slice parameter ${k} in an etp-1 run`);
    const list = slices.get(sl[1]!) ?? [];
    list[Number(sl[2])] ??= Float32Array.from(v);
    slices.set(sl[1]!, list);
  }
  for (const [k, list] of slices) {
    expect(list.filter((x) => x).length).toBe(etp);
    const which = k.endsWith("w2.weight") || k.endsWith("down_proj.weight") ? "w2" : "w1";
    m[k] = Array.from(gatherExpertSlices(list.map((w) => ({ w1: w, w2: w, w3: w })), inter, hidden)[which]);
  }
  return m;
}

describe("moe.etp_size in the engine equals the ep-only run", async () => {
  const runs: RunArgs[] = [];
  for (const stage of STAGES) for (const [ep, etp] of LAYOUTS) runs.push({ label: `stage ${stage}, ep ${ep} × etp ${etp}`, steps: STEPS, job: job(ep, etp, stage) });
  const nf = runs.length;
  runs.push({ label: "bf16 stage 3, ep 2 × etp 1", steps: STEPS, job: job(2, 1, 3, true) }, { label: "bf16 stage 3, ep 2 × etp 2", steps: STEPS, job: job(2, 2, 3, true) });
  const res = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs }, timeoutS: 300 })) as unknown as RunOut[][];
  const byRun = runs.map((_, i) => res.map((r) => r[i]!));
  const numel = Object.values(fullParams(byRun[0]!, 1)).reduce((s, v) => s + v.length, 0);
  const EXPERT = 2 * 4 * 3 * I * H;
  test("world 4, bf16 stage 3, ep 2 × etp 2: within the bf16 tolerance of ep 2 × etp 1", () => {
    const base = byRun[nf]!;
    const outs = byRun[nf + 1]!;
    for (const o of outs) o.losses.forEach((l, s) => expect(Math.abs(l - base[0]!.losses[s]!)).toBeLessThanOrEqual(2e-3));
    const a = fullParams(base, 1);
    const b = fullParams(outs, 2);
    let sq = 0;
    let n = 0;
    let mx = 0;
    for (const [k, v] of Object.entries(a)) v.forEach((x, j) => {
      const d = Math.abs(x - b[k]![j]!);
      sq += d * d;
      n++;
      mx = Math.max(mx, d);
    });
    expect(Math.sqrt(sq / n)).toBeLessThanOrEqual(2e-3);
    expect(mx).toBeLessThanOrEqual(2 * 1e-2 * STEPS);
  });
  runs.slice(0, nf).forEach((run, i) => {
    const [stage, li] = [STAGES[Math.floor(i / LAYOUTS.length)]!, i % LAYOUTS.length];
    const [ep, etp] = LAYOUTS[li]!;
    if (etp === 1) return;
    const base = byRun[Math.floor(i / LAYOUTS.length) * LAYOUTS.length]!;
    const outs = byRun[i]!;
    test(`world 4, ${run.label}: losses and parameters within 1e-6 of ep 2 × etp 1`, () => {
      let dl = 0;
      for (const o of outs) o.losses.forEach((l, s) => (dl = Math.max(dl, Math.abs(l - base[0]!.losses[s]!))));
      expect(dl).toBeLessThanOrEqual(TOL);
      const a = fullParams(base, 1);
      const b = fullParams(outs, etp);
      expect(Object.keys(b).sort()).toEqual(Object.keys(a).sort());
      let dp = 0;
      for (const [k, v] of Object.entries(a)) v.forEach((x, j) => (dp = Math.max(dp, Math.abs(x - b[k]![j]!))));
      expect(dp).toBeLessThanOrEqual(PARAM_TOL);
      // the run moved the parameters (the comparison is not of the initial values)
      expect(base[0]!.losses[0]).not.toBe(base[0]!.losses[STEPS - 1]);
    });
    test(`world 4, ${run.label}: per-rank model-state bytes equal the formula`, () => {
      const f = etpModelStateBytes({ denseParams: numel - EXPERT, expertParams: EXPERT, worldSize: 4, epSize: ep, etpSize: etp, stage: stage as 0 | 1 | 2 | 3, mixed: false });
      let sum = 0;
      for (const o of outs) {
        const measured = o.modelState.param + o.modelState.grad + o.modelState.optim;
        if (stage === 0) expect(measured).toBe(f.total);
        sum += measured - o.padding;
      }
      expect(sum).toBe(4 * f.total);
    });
    test(`world 4, ${run.label}: each expert slice unit is written by one rank; the manifest records etp_size`, () => {
      const writers = new Map<string, number>();
      for (const o of outs) for (const u of o.owned) if (u.includes(".experts.")) writers.set(u, (writers.get(u) ?? 0) + 1);
      expect(writers.size).toBe(2 * 4 * etp);
      if (stage === 0) for (const n of writers.values()) expect(n).toBe(1);
      expect((outs[0]!.manifest!.moe as { etp_size: number }).etp_size).toBe(etp);
    });
  });

  test("qwen3_moe (a dense layer of intermediate_size 7 beside experts of moe_intermediate_size 6), ZeRO-2: ep 2 × etp 2 within 1e-6 / 5e-6 of ep 2 × etp 1", async () => {
    const model = {
      model_type: "qwen3_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3,
      num_attention_heads: 2, num_key_value_heads: 1, head_dim: 6, num_local_experts: 4, num_experts_per_tok: 2,
      moe_intermediate_size: 6, norm_topk_prob: true, mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02,
      max_position_embeddings: 64,
    };
    const q = (etp: number) => tinyMoeJob({ model, moe: { ep_size: 2, etp_size: etp }, zero_optimization: { stage: 2 } });
    const r = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: STEPS, job: q(1) }, { steps: STEPS, job: q(2) }] }, timeoutS: 300 })) as unknown as RunOut[][];
    const [base, outs] = [r.map((x) => x[0]!), r.map((x) => x[1]!)];
    for (const o of outs) o.losses.forEach((l, s) => expect(Math.abs(l - base[0]!.losses[s]!)).toBeLessThanOrEqual(TOL));
    const a = fullParams(base, 1, 6, 16);
    const b = fullParams(outs, 2, 6, 16);
    expect(Object.keys(b).sort()).toEqual(Object.keys(a).sort());
    let dp = 0;
    for (const [k, v] of Object.entries(a)) v.forEach((x, j) => (dp = Math.max(dp, Math.abs(x - b[k]![j]!))));
    expect(dp).toBeLessThanOrEqual(PARAM_TOL);
    // the dense layer's MLP is whole on every rank; only expert parameters are sliced
    expect(Object.keys(outs[1]!.params).some((k) => k.startsWith("model.layers.1.mlp.gate_proj.weight") && !k.includes(".etp"))).toBe(true);
  }, 300_000);

  test("binding gradient clipping and activation checkpointing (ZeRO-3, ep 2 × etp 2 against ep 2 × etp 1 with the same options)", async () => {
    const v = (etp: number) => ({ ...job(2, etp, 3), gradient_clipping: 0.05, activation_checkpointing: { enabled: true } });
    const r = (await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: STEPS, job: v(1) }, { steps: STEPS, job: v(2) }] }, timeoutS: 300 })) as unknown as RunOut[][];
    const [base, outs] = [r.map((x) => x[0]!), r.map((x) => x[1]!)];
    for (const o of outs) o.losses.forEach((l, s) => expect(Math.abs(l - base[0]!.losses[s]!)).toBeLessThanOrEqual(TOL));
    const a = fullParams(base, 1);
    const b = fullParams(outs, 2);
    let dp = 0;
    for (const [k, x] of Object.entries(a)) x.forEach((y, j) => (dp = Math.max(dp, Math.abs(y - b[k]![j]!))));
    expect(dp).toBeLessThanOrEqual(PARAM_TOL);
  }, 300_000);

  test("a resume whose moe.etp_size differs from the checkpoint's is refused naming the key", async () => {
    const saved = byRun[1]![0]!.manifest!.moe; // stage 0, ep 2 × etp 2
    const err = await launch<RunOut[]>({ worldSize: 4, entry: TRAIN_ENTRY, args: { runs: [{ steps: 1, job: job(2, 1, 0), restore: { moe: saved } }] }, timeoutS: 300 }).then(() => null, (e: Error) => e);
    expect(String(err)).toContain("moe.etp_size: the checkpoint was saved with etp_size 2, the job has 1");
  });
});

test("config errors name moe.etp_size", () => {
  const bad = (over: Record<string, unknown>) => {
    try {
      resolveJobConfig({ ...tinyMoeJob(over), world_size: 4 });
      return "";
    } catch (e) {
      return String(e);
    }
  };
  expect(bad({ model: tinyMoeModel({ intermediate_size: 8 }), moe: { ep_size: 2, etp_size: 4 } })).toContain("moe.etp_size: world_size 4 is not divisible by ep_size × etp_size = 2 × 4 = 8");
  expect(bad({ moe: { etp_size: 2 } })).toContain("moe.etp_size: the expert's intermediate size 7 (model.intermediate_size) is not divisible by etp_size 2");
  expect(bad({ moe: { etp_size: 0 } })).toContain("moe.etp_size");
  expect(bad({ model: { ...tinyMoeModel({ intermediate_size: 8 }), from_pretrained: "/nonexistent" }, moe: { etp_size: 2 } })).toContain("moe.etp_size: etp_size 2 with model.from_pretrained");
  expect(bad({ model: tinyMoeModel({ intermediate_size: 8 }), moe: { ep_size: 2, etp_size: 2, placement: "balanced", replace_every: 2 } })).toContain("moe.etp_size: etp_size 2 with moe.replace_every 2");
  expect(bad({ model: tinyMoeModel({ intermediate_size: 8 }), moe: { ep_size: 2, etp_size: 2 } })).toBe("");
});
