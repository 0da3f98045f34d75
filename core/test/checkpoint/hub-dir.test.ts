/**
 * Hub checkpoint directories (issue 14): save_pretrained's sharded directory with index, the index
 * file, one file, and Transformers 5's fused layout all give the model's parameters; every missing
 * tensor is listed at once, shape mismatches name both shapes, unused tensors come back as a
 * warning; each rank reads only its shards (world 1 and 3, ZeRO 0 and 3, expert parallelism 2 with
 * an awkward world). The job's model config comes from config.json (model.from_pretrained or
 * --init-from DIR) and a disagreeing model section is an error naming the key.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";
import { HubCheckpoint, planHubLoad } from "../../src/checkpoint/hub-dir.ts";
import { ConfigError } from "../../src/config/index.ts";
import { loadJobConfig } from "../../src/config/load.ts";
import { applyHubModel, resolveModelConfig } from "../../src/config/resolve-model.ts";
import { launch } from "../../src/launch/index.ts";

const Q = "core/test/fixtures/qwen3_moe";
const tmp = mkdtempSync(join(tmpdir(), "hub-dir-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const qwenConfig = async () => JSON.parse(await Bun.file(`${Q}/config.json`).text()) as Record<string, unknown>;
const params = async () => {
  const w = readSafetensors(`${Q}/model.safetensors`);
  return [...w].map(([name, t]) => ({ name, shape: t.shape }));
};

describe("HubCheckpoint + planHubLoad", () => {
  test("sharded directory, its index, one file and the fused layout all match the model's parameters", async () => {
    const ps = await params();
    for (const path of [`${Q}/sharded`, `${Q}/sharded/model.safetensors.index.json`, Q, `${Q}/model.safetensors`, `${Q}/state_dict.safetensors`, "core/test/fixtures/mixtral/state_dict.safetensors"]) {
      const hub = HubCheckpoint.open(path);
      try {
        const want = path.includes("mixtral") ? [...readSafetensors("core/test/fixtures/mixtral/model.safetensors")].map(([name, t]) => ({ name, shape: t.shape })) : ps;
        const plan = planHubLoad(hub, want, false);
        expect(plan.unexpected).toEqual([]);
        expect(plan.sources.size).toBe(want.length);
      } finally {
        hub.close();
      }
    }
    const sharded = HubCheckpoint.open(`${Q}/sharded`);
    expect(new Set([...sharded.tensors.values()].map((t) => t.file)).size).toBe(6);
    expect(sharded.configFile).toBe(`${Q}/sharded/config.json`);
    sharded.close();
  });

  test("all missing tensors at once, shape mismatches with both shapes, unused tensors as a warning", async () => {
    const w = readSafetensors(`${Q}/model.safetensors`);
    const drop = ["model.layers.0.mlp.experts.3.up_proj.weight", "model.norm.weight", "model.layers.2.self_attn.q_norm.weight"];
    const kept = [...w].filter(([n]) => !drop.includes(n));
    const f1 = join(tmp, "missing.safetensors");
    saveStateDict(f1, kept);
    const hub = HubCheckpoint.open(f1);
    let msg = "";
    try {
      planHubLoad(hub, await params(), false);
    } catch (e) {
      msg = (e as Error).message;
      expect((e as Error).name).toBe("SafetensorsError");
    }
    hub.close();
    expect(msg).toContain("3 tensors the model needs are missing");
    for (const n of drop) expect(msg).toContain(n);
    // a wrong shape, and an extra tensor
    const f2 = join(tmp, "shape.safetensors");
    const bad = [...w].map(([n, t]) => (n === "model.layers.1.mlp.up_proj.weight" ? ([n, { shape: [t.shape[1]!, t.shape[0]!], data: t.data }] as const) : ([n, t] as const)));
    saveStateDict(f2, [...bad, ["extra.bias", { shape: [3], data: new Float32Array([1, 2, 3]) }] as const]);
    const h2 = HubCheckpoint.open(f2);
    expect(() => planHubLoad(h2, [{ name: "model.layers.1.mlp.up_proj.weight", shape: [48, 32] }], false)).toThrow("model.layers.1.mlp.up_proj.weight: checkpoint has [32, 48], the model needs [48, 32]");
    const ok = planHubLoad(h2, (await params()).filter((p) => p.name !== "model.layers.1.mlp.up_proj.weight"), false);
    expect(ok.unexpected).toEqual(["extra.bias", "model.layers.1.mlp.up_proj.weight"]);
    h2.close();
    // tied embeddings: a stored lm_head.weight is accepted
    const h3 = HubCheckpoint.open(`${Q}/model.safetensors`);
    expect(planHubLoad(h3, (await params()).filter((p) => p.name !== "lm_head.weight"), true).unexpected).toEqual([]);
    h3.close();
  });

  test("a config that disagrees with every tensor: counts, the first few and the likely cause, under 1 KiB", async () => {
    const message = (hub: HubCheckpoint, ps: { name: string; shape: readonly number[] }[]): string => {
      try {
        planHubLoad(hub, ps, false);
      } catch (e) {
        return (e as Error).message;
      } finally {
        hub.close();
      }
      return "";
    };
    // Mixtral weights into a Llama job: the dense MLP is missing, the experts are unused
    const llama = [...readSafetensors("core/test/fixtures/llama/model.safetensors")].map(([name, t]) => ({ name, shape: t.shape }));
    const m1 = message(HubCheckpoint.open("core/test/fixtures/mixtral/model.safetensors"), llama);
    expect(m1).toMatch(/^.*\d+ tensors the model needs are missing: [^;]*… and \d+ more/);
    expect(m1).toContain("Likely cause: the checkpoint holds a mixture-of-experts model and the config a dense one");
    expect(m1.length).toBeLessThan(1024);
    // every tensor one row larger than the weights: the sizes differ
    const grown = (await params()).map((p) => ({ name: p.name, shape: [p.shape[0]! + 1, ...p.shape.slice(1)] }));
    const m2 = message(HubCheckpoint.open(`${Q}/model.safetensors`), grown);
    expect(m2).toContain(`${grown.length} shape mismatches: `);
    expect(m2).toContain(`… and ${grown.length - 3} more`);
    expect(m2).toContain("Likely cause: the config's sizes differ from the weights'");
    expect(m2.length).toBeLessThan(1024);
    // fewer layers stored than the config has
    const deeper = [...(await params()), { name: "model.layers.9.input_layernorm.weight", shape: [32] }];
    expect(message(HubCheckpoint.open(`${Q}/model.safetensors`), deeper)).toContain("the config has more layers than the weights (the first missing one is layer 9): check num_hidden_layers");
  });

  test("a directory without weights, an index naming a missing shard: errors name the file", () => {
    const d = join(tmp, "empty");
    cpSync(`${Q}/sharded`, d, { recursive: true });
    rmSync(join(d, "model-00003-of-00006.safetensors"));
    expect(() => HubCheckpoint.open(d)).toThrow(/model\.safetensors\.index\.json.*names shard "model-00003-of-00006\.safetensors", which does not exist/);
    const e2 = join(tmp, "noweights");
    cpSync(`${Q}/config.json`, join(e2, "config.json"), { recursive: true });
    expect(() => HubCheckpoint.open(e2)).toThrow(/neither model\.safetensors nor model\.safetensors\.index\.json/);
  });
});

describe("the job's model from config.json", () => {
  test("from_pretrained: config.json is the model; agreeing keys pass, differing ones are named", async () => {
    const job = { model: { from_pretrained: "core/test/fixtures/qwen3_moe/sharded", num_hidden_layers: 3, rope_theta: 10000 } };
    const out = applyHubModel(job, { baseDir: process.cwd() }).model as Record<string, unknown>;
    expect(out.model_type).toBe("qwen3_moe");
    expect(out.from_pretrained).toBe(resolve(`${Q}/sharded`));
    expect(resolveModelConfig(out).config.from_pretrained).toBe(resolve(`${Q}/sharded`));
    let issues: readonly { path: string; message: string }[] = [];
    try {
      applyHubModel({ model: { from_pretrained: `${Q}/sharded`, model_type: "mixtral", hidden_size: 64, num_hidden_layers: 3 } }, { baseDir: process.cwd() });
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      issues = e.issues;
    }
    expect(issues.map((i) => i.path)).toEqual(["model.model_type", "model.hidden_size"]);
    expect(issues[1]!.message).toContain("64 differs from");
    expect(issues[1]!.message).toContain("32");
    // a directory that is not there (examples/fine-tune before make-tiny-model.ts) says so; one without config.json says that
    expect(() => applyHubModel({ model: { from_pretrained: `${Q}/no-such-dir` } }, { baseDir: process.cwd() })).toThrow(/no-such-dir does not exist \(a Hugging Face save_pretrained directory/);
    expect(() => applyHubModel({ model: { from_pretrained: "core/test" } }, { baseDir: process.cwd() })).toThrow(/core\/test has no config\.json/);
  });
  test("--init-from DIR with the default job: the model is config.json's (vocab 64 then fails the byte tokenizer, naming it)", async () => {
    await expect(loadJobConfig({ initFrom: `${Q}/sharded` })).rejects.toThrow(/model\.vocab_size 64 is smaller than the "byte" tokenizer's vocabulary 256/);
    const d = join(tmp, "cfg-only");
    cpSync(`${Q}/sharded`, d, { recursive: true });
    writeFileSync(join(d, "config.json"), JSON.stringify({ ...(await qwenConfig()), vocab_size: 256 }));
    const { config } = await loadJobConfig({ initFrom: d });
    expect(config.model.model_type).toBe("qwen3_moe");
    expect(config.moe!.k).toBe(2);
  });
});

describe("initFromHub on ranks (each reads its own shards)", () => {
  const job = (model: Record<string, unknown>, over: Record<string, unknown> = {}) => ({ model, train_micro_batch_size_per_gpu: 1, data: { seq_len: 8 }, ...over });
  test("qwen3_moe from the sharded directory: world 1, world 3 ZeRO-3, world 2 ZeRO-2 with ep_size 2 give the stored values", async () => {
    const cfg = { ...(await qwenConfig()), vocab_size: 256 };
    // a vocab-256 copy of the fixture's weights (embeddings/head padded with rows of the originals)
    const w = readSafetensors(`${Q}/model.safetensors`);
    const pad = (t: { shape: number[]; data: Float32Array | Int32Array }) => {
      const out = new Float32Array(256 * t.shape[1]!);
      for (let i = 0; i < out.length; i++) out[i] = (t.data as Float32Array)[i % t.data.length]! * (1 + Math.floor(i / t.data.length) * 0.01);
      return { shape: [256, t.shape[1]!], data: out };
    };
    const d = join(tmp, "q256");
    cpSync(`${Q}/sharded`, d, { recursive: true });
    for (const f of ["model.safetensors.index.json", ...Array.from({ length: 6 }, (_, i) => `model-0000${i + 1}-of-00006.safetensors`)]) rmSync(join(d, f));
    const entries = [...w].map(([n, t]) => (n === "model.embed_tokens.weight" || n === "lm_head.weight" ? ([n, pad(t)] as const) : ([n, t] as const)));
    const half = Math.ceil(entries.length / 2);
    saveStateDict(join(d, "model-00001-of-00002.safetensors"), entries.slice(0, half));
    saveStateDict(join(d, "model-00002-of-00002.safetensors"), entries.slice(half));
    const weightMap = Object.fromEntries(entries.map(([n], i) => [n, i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors"]));
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    writeFileSync(join(d, "config.json"), JSON.stringify(cfg));
    const expected = new Map(entries.map(([n, t]) => [n, Array.from(t.data)]));
    const entry = resolve("core/test/checkpoint/hub-init-entry.ts");
    for (const [world, over] of [[1, {}], [3, { zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 } }], [2, { zero_optimization: { stage: 2 }, moe: { ep_size: 2 } }]] as const) {
      const outs = (await launch({ worldSize: world, entry, args: { job: job(cfg, over), path: d } })) as { params: Record<string, number[]>; elements: number; warning: string | null }[];
      const total = [...expected.values()].reduce((s, v) => s + v.length, 0);
      const read = outs.reduce((s, o) => s + o.elements, 0);
      if (world === 1) expect(read).toBe(total);
      else expect(read).toBeLessThan(world * total); // shards and experts are read only where held
      for (const o of outs) {
        expect(o.warning).toBeNull();
        for (const [n, v] of Object.entries(o.params)) expect(v).toEqual(expected.get(n)!.map((x) => Math.fround(x)));
      }
      const seen = new Set(outs.flatMap((o) => Object.keys(o.params)));
      expect(seen.size).toBe(expected.size);
    }
  }, 300_000);
});

describe("bun run train --init-from DIR (CLI)", () => {
  const train = (args: string[]) => {
    const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", ...args], { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
  };
  test("a save_pretrained-style sharded directory trains with no model section; a wrong one exits 2 without a stack", async () => {
    const d = join(tmp, "q256"); // written by the previous test
    const job = join(tmp, "job.json");
    writeFileSync(job, JSON.stringify({ train_micro_batch_size_per_gpu: 2, data: { seq_len: 16 }, steps: 2, zero_optimization: { stage: 3 }, optimizer: { type: "AdamW", params: { lr: 1e-3 } } }));
    const ok = train(["--config", job, "--init-from", d, "--backend", "cpu", "--world-size", "2"]);
    expect(ok.out).toContain("init-from");
    expect(ok.out).toContain("model      qwen3_moe: 3 layers");
    expect(ok.code).toBe(0);
    const bad = train(["--config", job, "--init-from", Q, "--backend", "cpu"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("model.vocab_size 64");
    expect(bad.out).not.toMatch(/\n\s+at /);
    const disagree = join(tmp, "job2.json");
    writeFileSync(disagree, JSON.stringify({ model: { model_type: "qwen3_moe", hidden_size: 48 }, train_micro_batch_size_per_gpu: 2, data: { seq_len: 16 } }));
    const dis = train(["--config", disagree, "--init-from", d, "--backend", "cpu"]);
    expect(dis.code).toBe(2);
    expect(dis.out).toContain("model.hidden_size");
    expect(dis.out).not.toMatch(/\n\s+at /);
  }, 300_000);
});

describe("the seed's AutoEP block on a Mixtral directory (CLI)", () => {
  test("expert_parallel {enabled, autoep_size 4, preset mixtral}, world 4, ZeRO-3, weights in Transformers 5's fused layout", async () => {
    const M = "core/test/fixtures/mixtral";
    const d = join(tmp, "mixtral256");
    const w = readSafetensors(`${M}/state_dict.safetensors`);
    const pad = (t: { shape: number[]; data: Float32Array | Int32Array }) => {
      const out = new Float32Array(256 * t.shape[1]!);
      for (let i = 0; i < out.length; i++) out[i] = (t.data as Float32Array)[i % t.data.length]!;
      return { shape: [256, t.shape[1]!], data: out };
    };
    cpSync(`${M}/config.json`, join(d, "config.json"), { recursive: true });
    const cfg = JSON.parse(await Bun.file(`${M}/config.json`).text());
    writeFileSync(join(d, "config.json"), JSON.stringify({ ...cfg, vocab_size: 256 }));
    saveStateDict(join(d, "model.safetensors"), [...w].map(([n, t]) => (n === "model.embed_tokens.weight" || n === "lm_head.weight" ? ([n, pad(t)] as const) : ([n, t] as const))));
    const job = join(tmp, "autoep.json");
    writeFileSync(job, JSON.stringify({ train_micro_batch_size_per_gpu: 1, data: { seq_len: 16 }, steps: 2, zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 }, expert_parallel: { enabled: true, autoep_size: 4, preset_model: "mixtral" } }));
    const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", "--config", job, "--init-from", d, "--backend", "cpu", "--world-size", "4"], { stdout: "pipe", stderr: "pipe" });
    const out = p.stdout.toString() + p.stderr.toString();
    expect(out).toContain("moe        ep_size 4");
    expect(out).toMatch(/autoep: preset mixtral: \d+ MoE blocks \(model\.layers\.0\.block_sparse_moe, /);
    expect(out).toContain("init-from");
    expect(out).not.toContain("not used by");
    expect(p.exitCode).toBe(0);
    // the same job naming another family's preset: exit 2, both named
    writeFileSync(job, JSON.stringify({ train_micro_batch_size_per_gpu: 1, data: { seq_len: 16 }, expert_parallel: { enabled: true, autoep_size: 4, preset_model: "qwen3_moe" } }));
    const q = Bun.spawnSync(["bun", "core/src/cli/train.ts", "--config", job, "--init-from", d, "--backend", "cpu", "--world-size", "4"], { stdout: "pipe", stderr: "pipe" });
    expect(q.exitCode).toBe(2);
    expect(q.stdout.toString() + q.stderr.toString()).toMatch(/expert_parallel\.preset_model.*preset "qwen3_moe" does not match the model: model_type is "mixtral"/);
  }, 300_000);
});
