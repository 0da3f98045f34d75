/**
 * Export as a Hugging Face Hub directory (checkpoint/hub-export.ts): the shard plan as
 * `save_pretrained(max_shard_size=…)` makes it (order kept, every shard within the limit unless a
 * single tensor exceeds it, model-0000k-of-0000n names, one shard = model.safetensors without
 * index); `bun run zero-to-fp32 CKPT DIR --max-shard-size SIZE` of a qwen3_moe trained with AutoEP
 * (world 2, autoep_size 2, ZeRO-2) writes config.json, several shards and an index whose tensors
 * equal the single-file export bit for bit, and the directory trains again with `--init-from DIR`
 * (every tensor used); `save16bitModel(dir, { maxShardSize })` equals the single-file export.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { planHubShards } from "../../src/checkpoint/hub-export.ts";
import { resolveJobConfig } from "../../src/config/index.ts";
import { Engine } from "../../src/engine/engine.ts";
import { pluginsForJob } from "../../src/engine/plugin-loader.ts";
import { createSoloCommunicator } from "../../src/comm/solo.ts";

const tmp = mkdtempSync(join(tmpdir(), "hub-export-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Every tensor of a Hub directory (all shards) or one file, as plain arrays. */
function readAll(path: string): Map<string, number[]> {
  const files = path.endsWith(".safetensors") ? [path] : readdirSync(path).filter((f) => f.endsWith(".safetensors")).map((f) => join(path, f));
  const out = new Map<string, number[]>();
  for (const f of files) for (const [n, t] of readSafetensors(f)) out.set(n, Array.from(t.data as ArrayLike<number>));
  return out;
}

describe("shard plan", () => {
  test("order kept, each shard within the limit unless one tensor exceeds it, names", () => {
    const specs = [5, 1, 7, 3, 2, 9, 1, 4].map((n, i) => ({ name: `t${i}`, dtype: "F32" as const, shape: [n] }));
    const plan = planHubShards(specs, 7 * 4);
    expect(plan.map((s) => s.tensors.map((t) => t.name))).toEqual([["t0", "t1"], ["t2"], ["t3", "t4"], ["t5"], ["t6", "t7"]]);
    expect(plan.map((s) => s.bytes)).toEqual([24, 28, 20, 36, 20]);
    expect(plan.map((s) => s.file)).toEqual([1, 2, 3, 4, 5].map((k) => `model-0000${k}-of-00005.safetensors`));
    expect(planHubShards(specs, 1e9).map((s) => s.file)).toEqual(["model.safetensors"]);
    expect(() => planHubShards(specs, 0)).toThrow(/positive/);
  });
});

const QWEN = {
  model_type: "qwen3_moe", vocab_size: 256, hidden_size: 16, intermediate_size: 7, num_hidden_layers: 3,
  num_attention_heads: 2, num_key_value_heads: 1, head_dim: 6, num_local_experts: 4, num_experts_per_tok: 2,
  moe_intermediate_size: 5, norm_topk_prob: true, mlp_only_layers: [1], output_router_logits: true, router_aux_loss_coef: 0.02,
  max_position_embeddings: 64,
};
const JOB = {
  model: QWEN, data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 16 }, seed: 5, train_micro_batch_size_per_gpu: 2,
  optimizer: { type: "AdamW", params: { lr: 1e-2 } }, zero_optimization: { stage: 2 }, eval_interval: 0,
  expert_parallel: { enabled: true, autoep_size: 2 },
};
const run = (cmd: string[]) => {
  const p = Bun.spawnSync(["bun", ...cmd], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
};

describe("zero-to-fp32 --max-shard-size (CLI)", () => {
  test("a trained AutoEP checkpoint becomes a Hub directory equal to the single file, which --init-from trains", () => {
    const ck = join(tmp, "ck");
    const job = join(tmp, "job.json");
    writeFileSync(job, JSON.stringify({ ...JOB, steps: 2, checkpoint: { dir: ck, save_interval: 2 } }));
    const t = run(["core/src/cli/train.ts", "--config", job, "--backend", "cpu", "--world-size", "2"]);
    expect(t.code).toBe(0);
    const one = join(tmp, "one.safetensors");
    expect(run(["core/src/cli/zero-to-fp32.ts", ck, one]).code).toBe(0);
    const dir = join(tmp, "hub");
    const r = run(["core/src/cli/zero-to-fp32.ts", ck, dir, "--max-shard-size", "4KiB"]);
    expect(r.out).toContain("as a Hub directory");
    expect(r.code).toBe(0);
    const files = readdirSync(dir).sort();
    const shards = files.filter((f) => f.endsWith(".safetensors"));
    expect(shards.length).toBeGreaterThan(3);
    expect(shards[0]).toBe(`model-00001-of-${String(shards.length).padStart(5, "0")}.safetensors`);
    expect(files).toContain("config.json");
    expect(files).toContain("model.safetensors.index.json");
    const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8")) as { metadata: { total_size: number }; weight_map: Record<string, string> };
    const a = readAll(one);
    const b = readAll(dir);
    expect(Object.keys(index.weight_map).sort()).toEqual([...a.keys()].sort());
    expect(index.metadata.total_size).toBe([...a.values()].reduce((s, v) => s + 4 * v.length, 0));
    for (const [n, v] of a) expect(b.get(n)).toEqual(v);
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    expect(cfg.model_type).toBe("qwen3_moe");
    expect(cfg.num_local_experts).toBe(4);
    // the directory trains again (model from config.json, every tensor used)
    const job2 = join(tmp, "job2.json");
    const { model: _m, ...noModel } = JOB;
    writeFileSync(job2, JSON.stringify({ ...noModel, steps: 1 }));
    const again = run(["core/src/cli/train.ts", "--config", job2, "--init-from", dir, "--backend", "cpu", "--world-size", "2"]);
    expect(again.out).toContain("init-from");
    expect(again.out).not.toContain("not used by");
    expect(again.code).toBe(0);
    const bad = run(["core/src/cli/zero-to-fp32.ts", ck, dir, "--max-shard-size", "5 parsecs"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("--max-shard-size");
  }, 300_000);
});

describe("save16bitModel({ maxShardSize })", () => {
  test("world 1: shards + index + config.json equal the single-file export", async () => {
    const { config } = resolveJobConfig({ ...JOB, expert_parallel: { enabled: false }, zero_optimization: { stage: 0 } });
    const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: new CpuBackend(), plugins: await pluginsForJob(config), log: () => {} });
    const single = join(tmp, "s16-one");
    const sharded = join(tmp, "s16-hub");
    expect(await engine.save16bitModel(single)).toBe(true);
    expect(await engine.save16bitModel(sharded, { maxShardSize: 3000 })).toBe(true);
    engine.destroy();
    expect(existsSync(join(sharded, "model.safetensors.index.json"))).toBe(true);
    expect(existsSync(join(sharded, "config.json"))).toBe(true);
    const a = readAll(join(single, "model.safetensors"));
    const b = readAll(sharded);
    expect(b.size).toBe(a.size);
    for (const [n, v] of a) expect(b.get(n)).toEqual(v);
  });
});
