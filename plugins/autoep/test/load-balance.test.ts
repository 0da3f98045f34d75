/**
 * Aux-loss-free load balancing (load-balance.ts; expert_parallel.load_balance_coeff):
 * - the update against an independent float64 reference on random counts (ties to the mean give
 *   sign 0; the update is centred, so the biases' mean does not move);
 * - at world 3 the counts of every rank and micro-batch are summed before the update, and every
 *   rank ends with the same biases (equal to the reference on the summed counts);
 * - through the CLI (qwen3_moe, world 2, autoep_size 2, γ = 0.05): after 1 step the summary's
 *   expert_bias is exactly the update of zeros by the summary's expert counts; a run of 4 steps
 *   and a run resumed from its step-2 checkpoint give bit-identical losses and biases (the biases
 *   are saved in the checkpoint manifest and restored); balancing changes the routing (losses
 *   differ from γ = null).
 */
import { afterAll, describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch } from "@zeromoe/core/testing";
import { applyBiasUpdate } from "../src/load-balance.ts";
import { BALANCE_ENTRY } from "./fixtures/balance-entry.ts";
import { spawnSync } from "node:child_process";
import { scriptArgv } from "@zeromoe/kernels/runtime";

/** Reference update in float64 (module comment of load-balance.ts), rounded to f32 at the end. */
function reference(bias: ArrayLike<number>, counts: ArrayLike<number>, coeff: number): number[] {
  const E = bias.length;
  let mean = 0;
  for (let e = 0; e < E; e++) mean += counts[e]!;
  mean /= E;
  const d = Array.from({ length: E }, (_, e) => (counts[e]! < mean ? coeff : counts[e]! > mean ? -coeff : 0));
  const dm = d.reduce((a, b) => a + b, 0) / E;
  return Array.from({ length: E }, (_, e) => Math.fround(bias[e]! + Math.fround(d[e]! - dm)));
}

describe("expert-bias update", () => {
  test("matches the float64 reference on random counts (E = 7, 13), ties to the mean give 0", () => {
    let x = 12345;
    const rnd = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
    for (const E of [7, 13]) {
      for (let trial = 0; trial < 20; trial++) {
        const bias = Float32Array.from({ length: E }, () => rnd() - 0.5);
        const counts = Array.from({ length: E }, () => Math.floor(rnd() * 9));
        if (trial === 0) counts.fill(4); // all equal: no change
        const want = reference(bias, counts, 0.01);
        const got = Float32Array.from(bias);
        applyBiasUpdate(got, counts, 0.01);
        expect(Array.from(got)).toEqual(want);
        if (trial === 0) expect(Array.from(got)).toEqual(Array.from(bias));
      }
    }
  });
  test("world 3: counts summed over ranks and micro-batches, the same biases on every rank", async () => {
    const E = 6;
    const outs = await launch<{ seen: Record<number, number[]>; start: Record<number, number[]>; after: Record<number, number[]> }>({ worldSize: 3, entry: BALANCE_ENTRY, args: { E, coeff: 0.003, seed: 5 }, timeoutS: 60 });
    for (const l of [0, 2]) {
      const total = new Array(E).fill(0);
      for (const o of outs) o.seen[l]!.forEach((v, e) => (total[e] += v));
      const want = reference(outs[0]!.start[l]!, total, 0.003);
      for (const o of outs) expect(o.after[l]).toEqual(want);
      expect(outs[0]!.after[l]).not.toEqual(outs[0]!.start[l]);
    }
  });
});

const tmp = mkdtempSync(join(tmpdir(), "autoep-balance-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const QWEN = {
  model_type: "qwen3_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3,
  num_attention_heads: 2, num_key_value_heads: 1, head_dim: 6, num_local_experts: 4, num_experts_per_tok: 2,
  moe_intermediate_size: 5, norm_topk_prob: true, mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02,
  max_position_embeddings: 64,
};

function train(job: Record<string, unknown>, extra: string[]): { code: number; out: string } {
  const file = join(tmp, `job-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(job));
  const [cmd, ...args] = scriptArgv("core/src/cli/train.ts");
  const p = spawnSync(cmd!, [...args, "--config", file, "--backend", "cpu", "--world-size", "2", ...extra], { stdio: ["ignore", "pipe", "pipe"] });
  return { code: p.status ?? -1, out: p.stdout.toString() + p.stderr.toString() };
}
const summary = (f: string) => JSON.parse(readFileSync(f, "utf8")) as { losses: number[]; moe: { expert_counts: number[][] }; autoep: { expert_bias: Record<string, number[]>; load_balance_coeff: number | null } };

describe("load_balance_coeff through the CLI", () => {
  const base = (over: Record<string, unknown> = {}) => ({
    model: QWEN, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 }, seed: 3, train_micro_batch_size_per_gpu: 2,
    gradient_accumulation_steps: 2, optimizer: { type: "AdamW", params: { lr: 1e-2 } }, zero_optimization: { stage: 2 }, eval_interval: 0,
    expert_parallel: { enabled: true, autoep_size: 2, load_balance_coeff: 0.05 }, ...over,
  });
  test("one step: the bias is the update of zeros by the step's counts", () => {
    const s1 = join(tmp, "one.json");
    const r = train({ ...base(), steps: 1 }, ["--summary", s1]);
    expect(r.code).toBe(0);
    const s = summary(s1);
    expect(Object.keys(s.autoep.expert_bias).sort()).toEqual(["0", "2"]);
    for (const l of [0, 2]) {
      expect(s.autoep.expert_bias[String(l)]).toEqual(reference(new Float32Array(4), s.moe.expert_counts[l]!, 0.05));
      expect(s.autoep.expert_bias[String(l)]!.some((v) => v !== 0)).toBe(true);
    }
  }, 300_000);
  test("4 steps vs resumed from step 2: bit-identical losses and biases; γ null trains differently", () => {
    const ck = join(tmp, "ck");
    const full = join(tmp, "full.json");
    const r = train({ ...base(), steps: 4, checkpoint: { dir: ck, save_interval: 2, keep_last: 0 } }, ["--summary", full]);
    expect(r.code).toBe(0);
    const resumed = join(tmp, "resumed.json");
    const r2 = train({ ...base(), steps: 4 }, ["--resume", join(ck, "global_step2"), "--summary", resumed]);
    expect(r2.code).toBe(0);
    const a = summary(full);
    const b = summary(resumed);
    expect(b.losses).toEqual(a.losses.slice(2));
    expect(b.autoep.expert_bias).toEqual(a.autoep.expert_bias);
    const off = join(tmp, "off.json");
    expect(train({ ...base({ expert_parallel: { enabled: true, autoep_size: 2 } }), steps: 4 }, ["--summary", off]).code).toBe(0);
    const c = summary(off);
    expect(c.autoep.load_balance_coeff).toBeNull();
    expect(c.autoep.expert_bias).toEqual({});
    expect(c.losses.slice(0, 1)).toEqual(a.losses.slice(0, 1)); // the bias acts from the second step on
    expect(c.losses).not.toEqual(a.losses);
  }, 300_000);
});
