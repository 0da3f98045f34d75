/**
 * Hugging Face tokenizer.json (core/src/data/hf-tokenizer.ts, through @huggingface/tokenizers):
 * byte-level BPE ids checked against merges applied by hand, round trips, the eos separator,
 * errors naming the file; data.tokenizer as a path in a job (did-you-mean for a misspelt name);
 * a Hub-style directory (config.json, model.safetensors, tokenizer.json) trains on a text file
 * with its own tokenizer through the CLI; a pre-tokenized .bin corpus with a vocabulary under 256.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CpuBackend } from "@zeromoe/kernels";
import { saveStateDict } from "../../src/checkpoint/hf-save.ts";
import { ConfigError, resolveJobConfig as resolveJob } from "../../src/config/index.ts";
import { llamaConfig } from "../../src/models/config.ts";
import { LlamaForCausalLM } from "../../src/models/llama.ts";
import { DataError, HfTokenizer, createTokenizer, hfTokenizerVocabSize, loadCorpus } from "../../src/data/index.ts";
import { bytesToUnicode, writeFixtureTokenizer } from "./hub-tokenizer-fixture.ts";

const tmp = mkdtempSync(join(tmpdir(), "hf-tok-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const TOK = join(tmp, "tok");
const fx = writeFixtureTokenizer(TOK);

/** Byte-level BPE by hand (independent of the library): bytes → symbols, then repeatedly apply the
 * lowest-ranked merge present, per pre-token (GPT-2 split: a word with its leading space). */
function referenceEncode(text: string): number[] {
  const b2u = bytesToUnicode();
  const merges = [["t", "h"], ["th", "e"], ["Ġ", "c"], ["a", "t"], ["Ġ", "w"], ["Ġw", "h"], ["a", "l"], ["Ġwh", "al"], ["Ġwhal", "e"]];
  const out: number[] = [];
  // GPT-2's pre-tokenizer split, for lower-case words, spaces and ASCII punctuation
  for (const piece of text.match(/ ?[a-z]+| ?[^\sa-z]+|\s+(?!\S)|\s+/g) ?? []) {
    let syms = Array.from(new TextEncoder().encode(piece), (b) => b2u[b]!);
    for (;;) {
      let best = -1;
      let at = -1;
      for (let i = 0; i + 1 < syms.length; i++) {
        const r = merges.findIndex(([a, b]) => a === syms[i] && b === syms[i + 1]);
        if (r >= 0 && (best < 0 || r < best)) {
          best = r;
          at = i;
        }
      }
      if (best < 0) break;
      syms = [...syms.slice(0, at), syms[at]! + syms[at + 1]!, ...syms.slice(at + 2)];
    }
    for (const s of syms) out.push(fx.ids[s]!);
  }
  return out;
}

describe("HfTokenizer", () => {
  test("byte-level BPE ids equal merges applied by hand; decode round-trips any text; eos separates documents", () => {
    const tok = HfTokenizer.load(TOK);
    expect(tok.vocabSize).toBe(266);
    expect(tok.documentSeparator).toEqual([fx.eos]);
    for (const text of ["the cat", "the whale, the cat at the whaler!", "whale whales thethe  cat"]) {
      expect(Array.from(tok.encode(text))).toEqual(referenceEncode(text));
    }
    expect(Array.from(tok.encode("the cat"))).toEqual([fx.ids.the!, fx.ids["Ġc"]!, fx.ids.at!]);
    for (const text of ["Call me Ishmael. Some years ago—never mind how long", "naïve café 日本語 🐋\n\ttabs", ""]) {
      expect(tok.decode(tok.encode(text))).toBe(text);
    }
    // the file itself works as the path too; createTokenizer dispatches on it
    expect(createTokenizer(join(TOK, "tokenizer.json")).vocabSize).toBe(266);
    expect(hfTokenizerVocabSize(TOK)).toBe(266);
    expect(() => tok.decode([266])).toThrow(/outside the vocabulary \(0..265\)/);
  });

  test("errors name the path: no tokenizer.json, not JSON, no vocabulary", () => {
    expect(() => HfTokenizer.load(join(tmp, "nope"))).toThrow(DataError);
    expect(() => HfTokenizer.load(join(tmp, "nope"))).toThrow(/nope does not exist/);
    const empty = join(tmp, "empty");
    mkdirSync(empty, { recursive: true });
    expect(() => HfTokenizer.load(empty)).toThrow(/empty holds no tokenizer.json/);
    const bad = join(tmp, "bad");
    mkdirSync(bad, { recursive: true });
    writeFileSync(join(bad, "tokenizer.json"), "{ not json");
    expect(() => HfTokenizer.load(bad)).toThrow(/bad\/tokenizer.json: not valid JSON/);
    writeFileSync(join(bad, "tokenizer.json"), JSON.stringify({ model: { type: "BPE", vocab: {} } }));
    expect(() => HfTokenizer.load(bad)).toThrow(/no vocabulary/);
  });
});

describe("data.tokenizer in a job", () => {
  const model = { model_type: "llama", vocab_size: 266, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 1, num_attention_heads: 2, max_position_embeddings: 32 };
  const resolveJobConfig = (raw: Record<string, unknown>) => resolveJob({ train_micro_batch_size_per_gpu: 2, ...raw });
  test("a path is accepted; the model's vocabulary must cover the tokenizer's; a misspelt name gets a did-you-mean", () => {
    expect(resolveJobConfig({ model, data: { tokenizer: TOK, seq_len: 8 } }).config.data.tokenizer).toBe(TOK);
    const issues = (raw: Record<string, unknown>) => {
      try {
        resolveJobConfig(raw);
        return [];
      } catch (e) {
        return (e as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
      }
    };
    expect(issues({ model: { ...model, vocab_size: 265 }, data: { tokenizer: TOK, seq_len: 8 } }).join("\n")).toContain(`model.vocab_size 265 is smaller than the "${TOK}" tokenizer's vocabulary 266`);
    expect(issues({ model, data: { tokenizer: "byt", seq_len: 8 } }).join("\n")).toMatch(/data.tokenizer: expected "byte", "gpt2" or a path to a Hugging Face tokenizer.json.*did you mean "byte"\?/);
    expect(issues({ model, data: { tokenizer: tmp, seq_len: 8 } }).join("\n")).toContain("holds no tokenizer.json");
  });

  test("a .bin corpus needs only ids below the model's vocabulary (here 97 < 256)", async () => {
    const bin = join(tmp, "small.bin");
    const ids = Uint16Array.from({ length: 5000 }, (_, i) => (i * 7919) % 97);
    writeFileSync(bin, new Uint8Array(ids.buffer));
    const small = { ...model, vocab_size: 97 };
    expect(resolveJobConfig({ model: small, data: { dataset: bin, seq_len: 8 } }).config.model.vocab_size).toBe(97);
    const c = await loadCorpus(bin, createTokenizer("byte"), 97);
    expect(Array.from(c.tokens.subarray(0, 5))).toEqual(Array.from(ids.subarray(0, 5)));
    await expect(loadCorpus(bin, createTokenizer("byte"), 96)).rejects.toThrow(/small.bin: token 96 at index \d+ is outside the vocabulary \(ids must be < 96\)/);
    // text still needs the tokenizer's whole vocabulary
    expect(() => resolveJobConfig({ model: small, data: { dataset: "moby-dick", seq_len: 8 } })).toThrow(ConfigError);
  });
});

describe("a Hub-style directory trains on a text file with its own tokenizer (CLI)", () => {
  const run = (args: string[]) => {
    const p = Bun.spawnSync(["bun", "core/src/cli/train.ts", ...args], { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
  };
  test("--init-from DIR with data.tokenizer DIR: the corpus is the tokenizer's ids; .bin with vocab 97 trains; a bad .bin exits 2 naming it", async () => {
    const hub = join(tmp, "hub");
    writeFixtureTokenizer(hub);
    const hf = { architectures: ["LlamaForCausalLM"], model_type: "llama", vocab_size: 266, hidden_size: 24, intermediate_size: 40, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6, rope_theta: 10000, tie_word_embeddings: false, torch_dtype: "float32" };
    writeFileSync(join(hub, "config.json"), JSON.stringify(hf));
    const m = new LlamaForCausalLM(new CpuBackend(), llamaConfig(hf), { seed: 7 });
    saveStateDict(join(hub, "model.safetensors"), [...(await m.stateDict())].map(([n, t]) => [n, { shape: t.shape, data: t.data as Float32Array }] as const));
    const text = "the whale and the cat sat at the whaler's hatch. ".repeat(40);
    const txt = join(tmp, "corpus.txt");
    writeFileSync(txt, text);
    const want = HfTokenizer.load(hub).encode(text).length;
    const job = join(tmp, "job.json");
    writeFileSync(job, JSON.stringify({ data: { dataset: txt, tokenizer: hub, seq_len: 16, validation_fraction: 0.1 }, steps: 3, train_micro_batch_size_per_gpu: 2, eval_interval: 0, optimizer: { type: "AdamW", params: { lr: 1e-3 } } }));
    const r = run(["--config", job, "--init-from", hub, "--backend", "cpu"]);
    expect(r.out).toContain(`data       ${txt}: ${want} tokens`);
    expect(want).toBeLessThan(new TextEncoder().encode(text).length); // merges applied
    expect(r.out).toContain("init-from");
    expect(r.code).toBe(0);

    const bin = join(tmp, "small2.bin");
    writeFileSync(bin, new Uint8Array(Uint16Array.from({ length: 4000 }, (_, i) => (i * 31) % 97).buffer));
    const small = join(tmp, "small.json");
    writeFileSync(small, JSON.stringify({ model: { model_type: "llama", vocab_size: 97, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 1, num_attention_heads: 2, max_position_embeddings: 32 }, data: { dataset: bin, seq_len: 8 }, steps: 2, train_micro_batch_size_per_gpu: 2, eval_interval: 0 }));
    const s = run(["--config", small, "--backend", "cpu"]);
    expect(s.out).toContain(`data       ${bin}: 4000 tokens`);
    expect(s.code).toBe(0);
    writeFileSync(bin, new Uint8Array(Uint16Array.from([1, 2, 3, 97, 4]).buffer));
    const bad = run(["--config", small, "--backend", "cpu"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain(`${bin}: token 97 at index 3 is outside the vocabulary (ids must be < 97)`);
    expect(bad.out).not.toMatch(/\n\s+at /);
  }, 300_000);
});
