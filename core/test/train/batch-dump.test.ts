/**
 * `--dump-batches DIR`, `--save-init DIR` and the summary's per-step expert counts, end to end
 * through the train CLI (core/src/train/batch-dump.ts, core/src/checkpoint/fp32-weights.ts,
 * plugins/moe `step_expert_counts`). Independent references:
 * - the dump is what was trained: a fresh model loaded from the `--save-init` weights, run forward
 *   on the dumped micro-batches of every rank, gives the run's step-1 loss (the mean of the
 *   micro-batch losses over all ranks, engine.ts trainBatch);
 * - the step-0 weights are the run's: an fp32 job started with `--init-from` of them trains the same
 *   losses bit for bit, and a ZeRO-3 world-2 run writes the same tensors as a ZeRO-0 world-1 run;
 * - routing choices: each step's per-layer counts sum to train_batch_size × seq_len × k, and the
 *   steps add up to the run's `expert_counts`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { resolveJobConfig } from "../../src/config/resolve.ts";
import { createModel } from "../../src/engine/model-factory.ts";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { SafetensorsReader } from "../../src/checkpoint/safetensors.ts";
import { noGrad } from "../../src/tensor/index.ts";
import { batchDumpFile, BATCH_DUMP_MAX_BYTES } from "../../src/train/batch-dump.ts";
import { checkSummary, type TrainSummary } from "../../src/train/summary.ts";

const CLI = resolve(import.meta.dir, "../../src/cli/train.ts");
const dir = mkdtempSync(join(tmpdir(), "zeromoe-dump-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function train(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const p = Bun.spawn(["bun", CLI, ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr };
}

let n = 0;
function jobFile(job: Record<string, unknown>): string {
  const p = join(dir, `job${n++}.json`);
  writeFileSync(p, JSON.stringify(job));
  return p;
}

/** A small mixtral at awkward sizes: 3 experts top-2, seq 13, micro-batch 3, accumulation 2. */
function mixtral(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model: { model_type: "mixtral", vocab_size: 263, hidden_size: 24, intermediate_size: 20, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32, num_local_experts: 3, num_experts_per_tok: 2, output_router_logits: true, router_aux_loss_coef: 0.02 },
    data: { dataset: "moby-dick", tokenizer: "byte", seq_len: 13 },
    backend: "cpu", steps: 3, eval_interval: 0, steps_per_print: 1,
    train_micro_batch_size_per_gpu: 3, gradient_accumulation_steps: 2,
    optimizer: { type: "AdamW", params: { lr: 3e-3, weight_decay: 0.1 } },
    ...extra,
  };
}

function readDump(file: string): { ids: Int32Array; labels: Int32Array; shape: number[]; meta: Record<string, string> | null } {
  const r = SafetensorsReader.open(file);
  try {
    const t = (name: string) => {
      const info = r.header.byName.get(name)!;
      const b = r.readTensorBytes(name);
      return { data: new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)), shape: info.shape, dtype: info.dtype };
    };
    const ids = t("input_ids");
    const labels = t("labels");
    expect(ids.dtype).toBe("I32");
    expect(labels.shape).toEqual(ids.shape);
    return { ids: ids.data, labels: labels.data, shape: [...ids.shape], meta: r.header.metadata };
  } finally {
    r.close();
  }
}

describe("--dump-batches and --save-init", () => {
  test("world 2, bf16, ZeRO-2: the dumped batches and step-0 weights reproduce step 1's loss; per-step expert counts", async () => {
    const dump = join(dir, "dump-a");
    const init = join(dir, "init-a");
    const sum = join(dir, "sum-a.json");
    const job = mixtral({ world_size: 2, bf16: { enabled: true }, zero_optimization: { stage: 2 } });
    const r = await train(["--config", jobFile(job), "--dump-batches", dump, "--save-init", init, "--summary", sum]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const s = JSON.parse(readFileSync(sum, "utf8")) as TrainSummary;
    expect(checkSummary(s)).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(dump, "batches.json"), "utf8"));
    expect(manifest).toMatchObject({ format: "zeromoe-batches", version: 1, world_size: 2, micro_batches: 2, batch: 3, seq_len: 13, vocab_size: 263, start_step: 0, steps: 3 });
    expect(readdirSync(dump).sort()).toEqual(["batches.json", ...[1, 2, 3].flatMap((st) => [0, 1].map((rk) => batchDumpFile(st, rk)))].sort());
    // step 1 recomputed from the dump and the saved weights: bf16 parameters are the master's rounding
    const { config } = resolveJobConfig(job);
    const be = new CpuBackend();
    const model = createModel(be, config.model, { dtype: "bf16", seed: 7, allocate: true });
    const sd = readSafetensors(join(init, "model.safetensors"));
    model.loadStateDict(sd as never);
    let total = 0;
    for (const rank of [0, 1]) {
      const d = readDump(join(dump, batchDumpFile(1, rank)));
      expect(d.shape).toEqual([2, 3, 13]);
      expect(d.meta).toEqual({ step: "1", rank: String(rank), world_size: "2" });
      expect(Array.from(d.labels)).toEqual(Array.from(d.ids)); // this engine trains on labels = inputs
      for (let m = 0; m < 2; m++) {
        const ids = d.ids.subarray(m * 39, (m + 1) * 39);
        total += await noGrad(async () => {
          const out = await model.forward({ inputIds: ids, labels: ids, batch: 3, seq: 13 });
          const v = await out.loss!.item();
          out.logits?.dispose();
          out.loss!.dispose();
          out.auxLoss?.dispose();
          return v;
        });
      }
    }
    // the engine's forward runs the same kernels on the same values; only the order of the final
    // mean over 4 micro-batches differs (an all_reduce of two partial sums): f32 rounding
    expect(Math.abs(total / 4 - s.losses[0]!)).toBeLessThan(1e-5);
    model.destroy();
    // per-step expert counts
    const moe = s.moe!;
    expect(moe.step_expert_counts.length).toBe(3);
    const sumOver = moe.expert_counts.map((row) => row.map(() => 0));
    for (const st of moe.step_expert_counts) {
      st.forEach((row, l) => {
        expect(row.reduce((a, b) => a + b, 0)).toBe(config.train_batch_size * 13 * 2);
        row.forEach((c, e) => (sumOver[l]![e]! += c));
      });
    }
    expect(sumOver).toEqual(moe.expert_counts);
  }, 300_000);

  test("fp32: --init-from the step-0 weights trains the same losses; ZeRO-3 world 2 writes the same weights as ZeRO-0 world 1", async () => {
    const initA = join(dir, "init-b");
    const initC = join(dir, "init-c");
    const sumA = join(dir, "sum-b.json");
    const sumB = join(dir, "sum-b2.json");
    const job = mixtral({ seed: 11 });
    const a = await train(["--config", jobFile(job), "--save-init", initA, "--summary", sumA]);
    expect(a.code).toBe(0);
    const b = await train(["--config", jobFile(job), "--init-from", initA, "--summary", sumB]);
    expect(b.stderr).toBe("");
    expect(b.code).toBe(0);
    const la = (JSON.parse(readFileSync(sumA, "utf8")) as TrainSummary).losses;
    const lb = (JSON.parse(readFileSync(sumB, "utf8")) as TrainSummary).losses;
    expect(lb).toEqual(la);
    const c = await train(["--config", jobFile(mixtral({ seed: 11, world_size: 2, zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 } })), "--save-init", initC, "--steps", "1"]);
    expect(c.code).toBe(0);
    const wa = readSafetensors(join(initA, "model.safetensors"));
    const wc = readSafetensors(join(initC, "model.safetensors"));
    expect([...wc.keys()]).toEqual([...wa.keys()]);
    for (const [k, t] of wa) {
      expect(wc.get(k)!.shape).toEqual(t.shape);
      expect(Buffer.from(wc.get(k)!.data.buffer).equals(Buffer.from(t.data.buffer))).toBe(true);
    }
    expect(JSON.parse(readFileSync(join(initA, "config.json"), "utf8"))).toMatchObject({ model_type: "mixtral", num_local_experts: 3, dtype: "float32" });
  }, 300_000);

  test("bf16 ZeRO-3 world 2: --init-from fp32 weights sets the fp32 master to them exactly (not their bf16 rounding)", async () => {
    const initF = join(dir, "init-f32");
    const initG = join(dir, "init-bf16");
    // fp32 initial weights (normal draws, not bf16-representable), as PyTorch would write them
    const a = await train(["--config", jobFile(mixtral({ seed: 5 })), "--save-init", initF, "--steps", "1"]);
    expect(a.code).toBe(0);
    const b = await train(["--config", jobFile(mixtral({ seed: 5, world_size: 2, bf16: { enabled: true }, zero_optimization: { stage: 3, stage3_param_persistence_threshold: 0 } })), "--init-from", initF, "--save-init", initG, "--steps", "1"]);
    expect(b.stderr).toBe("");
    expect(b.code).toBe(0);
    const wf = readSafetensors(join(initF, "model.safetensors"));
    const wg = readSafetensors(join(initG, "model.safetensors"));
    let notBf16 = 0;
    for (const [k, t] of wf) {
      const f = t.data as Float32Array;
      expect(Buffer.from((wg.get(k)!.data as Float32Array).buffer).equals(Buffer.from(f.buffer))).toBe(true);
      const bits = new Uint32Array(f.buffer, f.byteOffset, f.length);
      for (const x of bits) if ((x & 0xffff) !== 0) notBf16++;
    }
    expect(notBf16).toBeGreaterThan(1000); // the check above would pass on bf16-rounded weights too
  }, 300_000);

  test("refusals: a non-empty folder, a dump over the limit, the same folder twice — exit 2 before training", async () => {
    const full = join(dir, "full");
    mkdirSync(full, { recursive: true });
    writeFileSync(join(full, "x"), "");
    const job = jobFile(mixtral());
    for (const [args, re] of [
      [["--dump-batches", full], /--dump-batches: .* is not empty \(1 entry\)/],
      [["--save-init", full], /--save-init: .* is not empty/],
      [["--dump-batches", join(dir, "same"), "--save-init", join(dir, "same")], /name the same directory/],
      [["--dump-batches", join(dir, "big"), "--steps", String(Math.ceil(BATCH_DUMP_MAX_BYTES / (2 * 3 * 13 * 8)) + 1)], /over the 16 GiB limit; dump fewer steps/],
    ] as [string[], RegExp][]) {
      const r = await train(["--config", job, ...args]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(re);
      expect(r.stdout).not.toMatch(/^step /m);
    }
  }, 300_000);
});
