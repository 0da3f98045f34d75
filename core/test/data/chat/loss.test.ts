/**
 * Chat data through the loader into a model (core/src/data/chat-corpus.ts, chat-rows.ts,
 * loader.ts): the labels the loss sees are the assistant turns only, the loss equals an
 * independent token-mean cross-entropy over exactly those positions, masked tokens never
 * contribute, and packed rows give every example the loss and gradients it has padded alone
 * (1e-6). Tiny llama at awkward sizes (hidden 18, 3 heads of 6, 1 kv head), byte tokenizer,
 * the Qwen2.5 template from a file, cpu backend.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { LlamaForCausalLM } from "../../../src/models/llama.ts";
import { readGrad } from "../../../src/nn/state-dict.ts";
import { backward, noGrad } from "../../../src/tensor/index.ts";
import { loadChatCorpus, type ChatCorpus } from "../../../src/data/chat-corpus.ts";
import { DataLoader } from "../../../src/data/loader.ts";
import { ByteTokenizer } from "../../../src/data/tokenizer.ts";
import type { DataConfig } from "../../../src/config/types.ts";
import { tinyLlama } from "../../tiny-models.ts";
import { QWEN25_TEMPLATE } from "./templates.ts";
import { trainedText } from "./trained-text.ts";

const dir = mkdtempSync(join(tmpdir(), "zeromoe-chat-loss-"));
const templateFile = join(dir, "qwen25.jinja");
writeFileSync(templateFile, QWEN25_TEMPLATE);
const dataset = join(dir, "chat.jsonl");
const CONVS = [
  { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] },
  { instruction: "Add", input: "2+2", output: "4", system: "Math." },
  { conversations: [{ from: "system", value: "S" }, { from: "human", value: "Name?" }, { from: "gpt", value: "Zed" }, { from: "human", value: "Age?" }, { from: "gpt", value: "Nine" }] },
];
const ANSWERS = [["Hello."], ["4"], ["Zed", "Nine"]];

function data(over: Partial<DataConfig>, file = dataset): DataConfig {
  return { dataset: file, tokenizer: "byte", seq_len: 192, validation_fraction: 0, format: "auto", chat_template: templateFile, train_on_prompt: false, packing: false, ...over };
}

/** One file per record shape (a file holds one shape). */
function files(): string[] {
  return CONVS.map((c, i) => {
    const f = join(dir, `c${i}.jsonl`);
    writeFileSync(f, JSON.stringify(c) + "\n");
    return f;
  });
}

const tok = new ByteTokenizer();
/** The chat corpus of `d` (a chat .jsonl: never null nor text). */
const chat = async (d: DataConfig): Promise<ChatCorpus> => (await loadChatCorpus(d, tok)) as ChatCorpus;
const be = new CpuBackend();
const cfg = tinyLlama({ vocab_size: 256, max_position_embeddings: 512, initializer_range: 0.2 });
const model = new LlamaForCausalLM(be, cfg, { seed: 3 });

async function lossAndGrads(ids: Int32Array, labels: Int32Array, seq: number, segmentIds?: Int32Array): Promise<{ loss: number; grads: Map<string, Float64Array> }> {
  model.zeroGrad();
  const out = await model.forward({ inputIds: ids, labels, batch: ids.length / seq, seq, ...(segmentIds ? { segmentIds } : {}) });
  const loss = await out.loss!.item();
  await backward(out.loss!);
  const grads = new Map<string, Float64Array>();
  for (const p of model.parameters()) grads.set(p.name, Float64Array.from((await readGrad(p))!.data as ArrayLike<number>));
  return { loss, grads };
}

function maxGradDiff(a: Map<string, Float64Array>, b: Map<string, Float64Array>): number {
  let worst = 0;
  for (const [name, g] of a) {
    const h = b.get(name)!;
    for (let i = 0; i < g.length; i++) worst = Math.max(worst, Math.abs(g[i]! - h[i]!));
  }
  return worst;
}

/** Token-mean cross-entropy in f64 from the model's logits over positions t with labels[t+1] ≠ −100 (the HF shift). */
async function referenceLoss(ids: Int32Array, labels: Int32Array, seq: number): Promise<number> {
  const B = ids.length / seq;
  const V = cfg.vocab_size;
  const logits = await noGrad(async () => {
    const out = await model.forward({ inputIds: ids, batch: B, seq });
    const v = Float64Array.from((await out.logits!.toArray()) as ArrayLike<number>);
    out.logits!.dispose();
    return v;
  });
  let sum = 0;
  let n = 0;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t + 1 < seq; t++) {
      const y = labels[b * seq + t + 1]!;
      if (y === -100) continue;
      const row = logits.subarray((b * seq + t) * V, (b * seq + t + 1) * V);
      let m = -Infinity;
      for (const x of row) m = Math.max(m, x);
      let z = 0;
      for (const x of row) z += Math.exp(x - m);
      sum += m + Math.log(z) - row[y]!;
      n++;
    }
  }
  return sum / n;
}

describe("chat data: masking and packing", () => {
  test("labels are the assistant turns (with their <|im_end|>\\n), one example per padded row", async () => {
    const got: string[][] = [];
    for (const f of files()) {
      const c = (await chat(data({}, f)));
      expect(c.rows.rows).toBe(1);
      expect(c.rows.segmentIds).toBeNull();
      const { ids, labels } = c.rows;
      got.push(trainedText(tok, ids, labels));
      // the row starts with the render (the pad tail follows)
      expect(tok.decode(ids.subarray(0, 10))).toBe("<|im_start");
    }
    expect(got).toEqual(ANSWERS.map((a) => a.map((x) => `${x}<|im_end|>\n`)));
  });

  test("the loss is the token mean over assistant positions only; masked tokens never contribute", async () => {
    const f = files()[2]!;
    const c = (await chat(data({}, f)));
    const { ids, labels } = c.rows;
    const S = c.rows.seqLen;
    const base = await lossAndGrads(ids, labels, S);
    expect(Math.abs(base.loss - (await referenceLoss(ids, labels, S)))).toBeLessThanOrEqual(1e-6);
    // masked ids after the last scored position (the pad tail) are flipped: identical gradients
    let last = 0;
    for (let t = 0; t < S; t++) if (labels[t] !== -100) last = t;
    const flipped = Int32Array.from(ids, (v, t) => (t > last ? (v + 101) % 256 : v));
    const fl = await lossAndGrads(flipped, labels, S);
    expect(fl.loss).toBe(base.loss);
    expect(maxGradDiff(base.grads, fl.grads)).toBe(0);
    // masked prompt positions as targets: with train_on_prompt they are scored (the loss differs),
    // so the equality above is not vacuous
    const all = (await chat(data({ train_on_prompt: true }, f)));
    const everything = await lossAndGrads(all.rows.ids, all.rows.labels, S);
    expect(Math.abs(everything.loss - base.loss)).toBeGreaterThan(1e-3);
    expect(Math.abs(everything.loss - (await referenceLoss(all.rows.ids, all.rows.labels, S)))).toBeLessThanOrEqual(1e-6);
  }, 300_000);

  test("packed rows give each example its padded-alone loss and gradients (1e-6)", async () => {
    const padded = await Promise.all(files().map(async (f) => (await chat(data({}, f))).rows));
    // the three conversations in one file of messages records (a file holds one shape)
    const msgs = CONVS.map((c) => {
      if ("messages" in c) return c;
      if ("instruction" in c) return { messages: [{ role: "system", content: c.system }, { role: "user", content: `${c.instruction}\n\n${c.input}` }, { role: "assistant", content: c.output }] };
      return { messages: c.conversations.map((t) => ({ role: t.from === "human" ? "user" : t.from === "gpt" ? "assistant" : "system", content: t.value })) };
    });
    const all = join(dir, "all.jsonl");
    writeFileSync(all, msgs.map((m) => JSON.stringify(m)).join("\n") + "\n");
    const S = 512;
    const packed = (await chat(data({ packing: true, seq_len: S }, all))).rows;
    expect([packed.rows, packed.examples]).toEqual([1, 3]);
    const seg = packed.segmentIds!;
    let start = 0;
    for (let e = 0; e < 3; e++) {
      const alone = padded[e]!;
      const len = alone.exampleLengths[0]!;
      expect(packed.exampleLengths[e]).toBe(len);
      // the example's segment in the packed row
      expect(seg[start]).toBe(e);
      let end = start;
      while (end < S && seg[end] === e) end++;
      expect(end - start).toBe(len);
      expect(Array.from(packed.ids.subarray(start, end))).toEqual(Array.from(alone.ids.subarray(0, len)));
      const onlyE = new Int32Array(S).fill(-100);
      onlyE.set(packed.labels.subarray(start, end), start);
      const a = await lossAndGrads(alone.ids, alone.labels, alone.seqLen);
      const p = await lossAndGrads(packed.ids, onlyE, S, seg);
      expect(Math.abs(a.loss - p.loss)).toBeLessThanOrEqual(1e-6);
      expect(maxGradDiff(a.grads, p.grads)).toBeLessThanOrEqual(1e-6);
      start = end;
    }
    // the whole packed row: the token-weighted mean of the per-example losses
    const whole = await lossAndGrads(packed.ids, packed.labels, S, seg);
    let num = 0;
    for (const r of padded) num += (await lossAndGrads(r.ids, r.labels, r.seqLen)).loss * r.scored;
    expect(Math.abs(whole.loss - num / padded.reduce((s, r) => s + r.scored, 0))).toBeLessThanOrEqual(1e-6);
    expect(packed.scored).toBe(padded.reduce((s, r) => s + r.scored, 0));
  }, 300_000);

  test("the loader hands labels and segment ids to the micro-batches; errors", async () => {
    const all = join(dir, "all.jsonl");
    // seq_len 192 holds every example whole (64 cut all three before their assistant turns)
    const loader = await DataLoader.fromConfig(data({ packing: true, seq_len: 192, validation_fraction: 0 }, all), { micro: 1, accum: 1, worldSize: 1, rank: 0, seed: 1 });
    const mb = loader.nextMicroBatch();
    expect(mb.labels).toBeDefined();
    expect(mb.segmentIds).toBeDefined();
    expect(mb.targets.subarray(0, 191)).toEqual(mb.labels!.subarray(1, 192));
    expect(mb.labels!.some((l) => l !== -100)).toBe(true);
    // a seq_len that cuts every example before its assistant turn would train on nothing: refused
    const [c0] = files();
    await expect(chat(data({ seq_len: 8 }, c0))).rejects.toThrow(/data\.seq_len: 8 tokens leave no assistant token to train on in .*c0\.jsonl \(1 of 1 examples cut to seq_len; the longest is \d+ tokens\); raise data\.seq_len/);
    await expect(chat(data({ seq_len: 8, packing: true }, c0))).rejects.toThrow(/data\.seq_len: 8 tokens leave no assistant token/);
    // a relative chat dataset that is missing names where it was looked for
    await expect(chat(data({}, "no-such-chat.jsonl"))).rejects.toThrow(/data\.dataset: file not found: no-such-chat\.jsonl \(looked for .*no-such-chat\.jsonl; relative paths start at the working directory/);
    // chat keys on plain text are refused, not ignored
    const txt = join(dir, "plain.txt");
    writeFileSync(txt, "x".repeat(1000));
    await expect(DataLoader.fromConfig(data({ packing: true }, txt), { micro: 1, accum: 1, worldSize: 1, rank: 0, seed: 1 })).rejects.toThrow(/data\.chat_template, data\.packing apply to chat data, but .*plain\.txt is read as plain text/);
    await expect(DataLoader.fromConfig(data({ format: "alpaca" }, txt), { micro: 1, accum: 1, worldSize: 1, rank: 0, seed: 1 })).rejects.toThrow(/data\.format "alpaca" needs a \.jsonl or \.parquet dataset/);
  });
});

