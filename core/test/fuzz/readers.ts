/**
 * The readers of the supervised fuzz (supervise.ts) and how each case is made and run: a seed input
 * built once per worker (cached on disk under the seed directory, so a respawned worker reuses it),
 * a mutation of it per case (fuzz-kit.ts and the decoder fuzz's mutators, plus the patterns of
 * issue 32: Object.prototype names as keys, catastrophic regexes, non-string tokens, out-of-range
 * and duplicated ids, deep nesting, shapes changed in a re-signed manifest, 4096 layers), and the
 * real code path that reads it — the one a CLI runs:
 *
 * | reader | seed | path run per case |
 * | --- | --- | --- |
 * | safetensors | 4 tensors, F32/BF16/I64/empty | SafetensorsReader + decodeTensor of every tensor |
 * | rankFile | 3 rank files (shuffle, deflate, raw) | RecordFileReader.open + verifyAll |
 * | deepspeed | a DeepSpeed config | resolveJobConfig(job, {deepspeed}) + summarizeJob |
 * | jobConfig | a job file | parseJsonConfig + resolveJobConfig + summarizeJob |
 * | hubConfig | a Hub directory (config.json, 2+ shards, index) from zero-to-fp32 | loadInferenceModel (eval/generate) |
 * | manifest | a world-2 ZeRO-3 checkpoint, re-signed after each edit | loadInferenceModel, zeroToFp32, ShardSource.verifyAll |
 * | tokenizer | GPT-2-style BPE with a Split regex, WordPiece, Unigram | HfTokenizer.load + encode + decode |
 *
 * A case is clean when it succeeds or throws the reader's own error type (`clean`), with a message
 * of at most 1 KiB; anything else is a crash.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { zeroToFp32 } from "../../src/checkpoint/consolidate.ts";
import { CheckpointError } from "../../src/checkpoint/errors.ts";
import { decodeTensor } from "../../src/checkpoint/hf-load.ts";
import { readManifest } from "../../src/checkpoint/manifest.ts";
import { RecordFileReader, RecordFileWriter } from "../../src/checkpoint/record-file.ts";
import { SafetensorsError, SafetensorsReader, writeSafetensors } from "../../src/checkpoint/safetensors.ts";
import { ShardSource } from "../../src/checkpoint/shard-source.ts";
import { loadInferenceModel, UsageError } from "../../src/cli/model-source.ts";
import { ConfigError } from "../../src/config/errors.ts";
import { parseJsonConfig, resolveJobConfig } from "../../src/config/resolve.ts";
import { summarizeJob } from "../../src/config/summary.ts";
import { HfTokenizer } from "../../src/data/hf-tokenizer.ts";
import { DataError } from "../../src/data/sources.ts";
import { launch } from "../../src/launch/index.ts";
import { tinyJob } from "../engine/fixtures.ts";
import { CKPT_ENTRY, type RunOut } from "../checkpoint/fixture.ts";
import { mutateBytes, mutateTree, pick, rng, spliceJson } from "../checkpoint/fuzz-kit.ts";
import { DS_TEXT, JOB_TEXT, mutateJson, mutateManifest, mutateRankFile, mutateSafetensors, randomF32, resign, sharedDeep, splitRankFile, type RankParts } from "../checkpoint/fuzz-runner.ts";
import { fixtureTokenizerJson } from "../data/hub-tokenizer-fixture.ts";

/** Error types a reader may end in (its own, documented ones). */
const CLEAN = [CheckpointError, SafetensorsError, ConfigError, DataError, UsageError];
export function isCleanError(e: unknown): boolean {
  return CLEAN.some((T) => e instanceof T);
}

/** A reader: `prepare` builds the seeds under `seedDir` (once; cached there), `one` runs case `c`. */
export interface Reader {
  prepare(seedDir: string): Promise<void>;
  one(seedDir: string, workDir: string, r: () => number): Promise<void>;
}

const PROTO_NAMES = ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf", "isPrototypeOf"];
/** Rename a random key of a parsed tree to an Object.prototype name (JSON text keeps it a plain key). */
function protoKey(text: string, r: () => number): string {
  const keys = [...text.matchAll(/"([A-Za-z_][A-Za-z0-9_]*)":/g)];
  if (keys.length === 0) return text;
  const m = keys[pick(r, keys.length)]!;
  const name = PROTO_NAMES[pick(r, PROTO_NAMES.length)]!;
  const value = pick(r, 2) === 0 ? "" : `{"${PROTO_NAMES[pick(r, PROTO_NAMES.length)]}": 1}, "${name}_": `;
  return text.slice(0, m.index) + `"${name}": ${value}` + text.slice(m.index! + m[0].length);
}

const text = (p: string) => readFileSync(p, "utf8");

// ---------------------------------------------------------------------------------------------

const safetensors: Reader = {
  async prepare(dir) {
    const r = rng(3);
    writeSafetensors(join(dir, "orig.safetensors"), [
      { name: "a.weight", dtype: "F32", shape: [3, 7], data: new Float32Array(21).map(() => r()) },
      { name: "b.bias", dtype: "BF16", shape: [5], data: new Uint16Array(5).map(() => pick(r, 65536)) },
      { name: "c.ids", dtype: "I64", shape: [2, 2], data: new BigInt64Array([1n, -2n, 3n, 1n << 40n]) },
      { name: "d.empty", dtype: "F16", shape: [0, 4], data: new Uint16Array(0) },
    ], { format: "pt" });
  },
  async one(dir, work, r) {
    const target = join(work, "t.safetensors");
    writeFileSync(target, mutateSafetensors(readFileSync(join(dir, "orig.safetensors")), r));
    const rd = SafetensorsReader.open(target);
    try {
      for (const n of rd.names()) decodeTensor(rd.readTensorBytes(n), rd.info(n), target);
    } finally {
      rd.close();
    }
  },
};

let rankSeeds: RankParts[] | null = null;
const rankFile: Reader = {
  async prepare(dir) {
    const r = rng(5);
    const w = RecordFileWriter.create(join(dir, "a.zmck"), 1, { tag: "global_step3", worldSize: 2, layout: { zero_stage: 3, ep_size: 2, placement_sha256: null } });
    w.add("embed/params/0", "f32", 0, 1, randomF32(1, r));
    w.add("embed/m/0", "f32", 0, 97, randomF32(97, r));
    w.add("layers.0/params/0", "bf16", 0, 31, new Uint8Array(62).map(() => pick(r, 256)));
    w.add("layers.0/v/0", "f32", 0, 257, new Uint8Array(257 * 4));
    w.finish(1);
    const w2 = RecordFileWriter.create(join(dir, "b.zmck"), 0, { codec: "deflate", tag: "t", worldSize: 1 });
    w2.add("layers.1/m/0", "f32", 0, 41, randomF32(41, r));
    w2.add("layers.1/params/0", "f16", 0, 3, new Uint8Array(6).map(() => pick(r, 256)));
    w2.finish(0);
    const w3 = RecordFileWriter.create(join(dir, "c.zmck"), 0, { codec: "raw", tag: "t", worldSize: 1 });
    w3.add("head/master/5", "f32", 5, 13, randomF32(13, r));
    w3.add("head/params/5", "i32", 5, 2, randomF32(2, r));
    w3.finish(0);
  },
  async one(dir, work, r) {
    rankSeeds ??= ["a", "b", "c"].map((f) => splitRankFile(readFileSync(join(dir, `${f}.zmck`))));
    const target = join(work, "t.zmck");
    writeFileSync(target, mutateRankFile(rankSeeds[pick(r, 10) < 6 ? 0 : pick(r, 3)]!, r));
    const rd = RecordFileReader.open(target);
    try {
      rd.verifyAll();
    } finally {
      rd.close();
    }
  },
};

function mutateConfigText(t: string, r: () => number): string {
  return pick(r, 4) === 0 ? protoKey(t, r) : mutateJson(t, r);
}

const deepspeed: Reader = {
  async prepare() {},
  async one(_d, _w, r) {
    const ds = pick(r, 10) === 0 ? sharedDeep(r)[1] : mutateConfigText(DS_TEXT, r);
    const { config } = resolveJobConfig(parseJsonConfig(JOB_TEXT, "job.json"), { source: "job.json", deepspeed: { raw: parseJsonConfig(ds, "ds.json"), source: "ds.json" } });
    summarizeJob(config);
  },
};

const jobConfig: Reader = {
  async prepare() {},
  async one(_d, _w, r) {
    const job = pick(r, 10) === 0 ? sharedDeep(r)[0] : mutateConfigText(JOB_TEXT, r);
    const { config } = resolveJobConfig(parseJsonConfig(job, "job.json"), { source: "job.json" });
    summarizeJob(config);
  },
};

// ---------------------------------------------------------------------------------------------
// checkpoints and Hub directories

const MODEL = { model_type: "llama", vocab_size: 256, hidden_size: 8, intermediate_size: 5, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, max_position_embeddings: 16 };

async function checkpointSeed(dir: string): Promise<string> {
  const ck = join(dir, "ck");
  if (existsSync(join(ck, "t", "manifest.json"))) return ck;
  await launch<RunOut[]>({
    worldSize: 2, entry: CKPT_ENTRY, timeoutS: 300,
    args: { runs: [{ job: tinyJob({ model: MODEL, zero_optimization: { stage: 3 } }), ops: [{ op: "train", steps: 1 }, { op: "save", dir: ck, tag: "t" }] }] },
  });
  const mf = join(ck, "t", "manifest.json");
  writeFileSync(mf, resign(text(mf).replace(/"created": "[^"]*"/, `"created": "2026-01-01T00:00:00.000Z"`)));
  return ck;
}

/** Value-level edits of issue 32 on a manifest or config tree (besides fuzz-kit's). */
function issueEdit(m: Record<string, any>, r: () => number, isManifest: boolean): void {
  const model = isManifest ? m.config?.model : m;
  switch (pick(r, 4)) {
    case 0:
      if (model) model.num_hidden_layers = [4096, 64, 3, 1][pick(r, 4)];
      return;
    case 1:
      if (model) model.hidden_size = [4096, 16, 1 << 20][pick(r, 3)];
      return;
    case 2:
      if (isManifest && Array.isArray(m.units)) {
        const u = m.units[pick(r, m.units.length)];
        const p = u?.params?.[pick(r, u.params?.length ?? 1)];
        if (p && Array.isArray(p.shape)) p.shape = pick(r, 2) === 0 ? [...p.shape].reverse() : [p.shape[0] ?? 1, ...(p.shape.slice(1) as number[]).map((d) => d * 2)];
      }
      return;
    default:
      if (isManifest) m[["ep_size", "zero_stage", "world_size"][pick(r, 3)]!] = [2, 3, 4][pick(r, 3)];
  }
}

async function inference(from: string): Promise<void> {
  const m = await loadInferenceModel({ from, backend: "cpu", probeTokens: 1 });
  m.model.destroy();
}

const manifest: Reader = {
  async prepare(dir) {
    await checkpointSeed(dir);
  },
  async one(dir, work, r) {
    const ck = join(work, "ck");
    rmSync(ck, { recursive: true, force: true });
    cpSync(join(dir, "ck"), ck, { recursive: true });
    const mf = join(ck, "t", "manifest.json");
    const orig = text(mf);
    let out: string;
    if (pick(r, 3) === 0) {
      const m = JSON.parse(orig);
      delete m.manifest_sha256;
      issueEdit(m, r, true);
      out = resign(JSON.stringify({ ...m, manifest_sha256: "0".repeat(64) }, null, 1) + "\n");
    } else out = mutateManifest(orig, r);
    writeFileSync(mf, out);
    switch (pick(r, 3)) {
      case 0:
        await inference(ck);
        return;
      case 1:
        zeroToFp32(ck, join(work, "out.safetensors"));
        return;
      default: {
        const tagDir = join(ck, "t");
        const src = new ShardSource(tagDir, readManifest(tagDir));
        try {
          src.verifyAll();
        } finally {
          src.close();
        }
      }
    }
  },
};

const hubConfig: Reader = {
  async prepare(dir) {
    const hub = join(dir, "hub");
    if (existsSync(join(hub, "config.json"))) return;
    const ck = await checkpointSeed(dir);
    zeroToFp32(ck, hub, undefined, { maxShardSize: 2048 });
    if (!existsSync(join(hub, "model.safetensors.index.json"))) throw new Error("hub seed: expected a sharded directory with an index");
  },
  async one(dir, work, r) {
    const hub = join(work, "hub");
    rmSync(hub, { recursive: true, force: true });
    cpSync(join(dir, "hub"), hub, { recursive: true });
    const target = join(hub, pick(r, 2) === 0 ? "config.json" : "model.safetensors.index.json");
    const orig = text(target);
    let out: string;
    const k = pick(r, 4);
    if (k === 0 && target.endsWith("config.json")) {
      const c = JSON.parse(orig);
      issueEdit(c, r, false);
      out = JSON.stringify(c);
    } else if (k === 1) out = protoKey(orig, r);
    else if (k === 2) out = new TextDecoder().decode(mutateBytes(new TextEncoder().encode(orig), r));
    else {
      const v = JSON.parse(orig);
      mutateTree(v, r, false);
      out = spliceJson(JSON.stringify(v), r);
    }
    writeFileSync(target, out);
    await inference(hub);
  },
};

// ---------------------------------------------------------------------------------------------
// tokenizer.json

const CATASTROPHIC = [".*.*.*=.*", "(a+)+$", "(a|aa)*c", "(\\w+\\s?)*$", "(.*a){12}", "(x+x+)+y", "\\s+(?!\\S)|(\\s*)*$", "(?=a)+", "([^=]*)*=", "(\\p{L}|\\p{L}\\p{M})*!"];
const TEXT = "Call me Ishmael. Some years ago — never mind how long precisely — having little or no money in my purse, 42 times; 'tis the whale's way.\n\n  ".repeat(8) + "a".repeat(600) + "=".repeat(3);

function tokenizerSeeds(): Record<string, unknown>[] {
  const bpe = fixtureTokenizerJson().json as Record<string, any>;
  bpe.pre_tokenizer = { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+" }, behavior: "Isolated", invert: false }, { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] };
  const chars = [..."abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;'—=\n"];
  const wpVocab: Record<string, number> = { "[UNK]": 0 };
  chars.forEach((c) => (wpVocab[c] = Object.keys(wpVocab).length));
  chars.forEach((c) => (wpVocab[`##${c}`] = Object.keys(wpVocab).length));
  const wordPiece = {
    added_tokens: [{ id: 0, content: "[UNK]", special: true, normalized: false }],
    normalizer: { type: "Sequence", normalizers: [{ type: "NFC" }, { type: "Replace", pattern: { Regex: "\\s+" }, content: " " }] },
    pre_tokenizer: { type: "BertPreTokenizer" }, post_processor: null,
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: wpVocab },
  };
  const unigram = {
    added_tokens: [{ id: 0, content: "<unk>", special: true, normalized: false }, { id: 1, content: "</s>", special: true, normalized: false }],
    normalizer: { type: "Sequence", normalizers: [{ type: "Replace", pattern: { String: " " }, content: "▁" }, { type: "Prepend", prepend: "▁" }] },
    pre_tokenizer: null, post_processor: null,
    decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " }, { type: "ByteFallback" }, { type: "Fuse" }] },
    model: { type: "Unigram", unk_id: 0, byte_fallback: false, vocab: [["<unk>", 0], ["</s>", 0], ...["▁", ...chars, "▁the", "▁whale", "ing"].map((c, i) => [c, -1 - i / 10])] },
  };
  return [bpe, wordPiece, unigram];
}

/** Issue 32's tokenizer.json edits: catastrophic regexes, non-string tokens, bad ids, deep nesting. */
function tokenizerEdit(t: Record<string, any>, r: () => number): void {
  const cat = CATASTROPHIC[pick(r, CATASTROPHIC.length)]!;
  switch (pick(r, 8)) {
    case 0:
      t.pre_tokenizer = { type: "Split", pattern: { Regex: cat }, behavior: ["Isolated", "Removed"][pick(r, 2)], invert: pick(r, 2) === 0 };
      return;
    case 1:
      t.normalizer = { type: "Replace", pattern: { Regex: cat }, content: ["", "x", "xyz".repeat(300)][pick(r, 3)] };
      return;
    case 2:
      t.decoder = { type: "Replace", pattern: { Regex: cat }, content: "" };
      return;
    case 3: {
      const v = t.model.vocab;
      if (Array.isArray(v)) v[pick(r, v.length)] = [[5, -1], [null, 0], ["x", "y"], [["a"], 1]][pick(r, 4)];
      else v[Object.keys(v)[pick(r, Object.keys(v).length)]!] = [-1, 2 ** 40, 1.5, "3", 0, null][pick(r, 6)];
      return;
    }
    case 4:
      if (Array.isArray(t.added_tokens)) t.added_tokens.push({ id: [0, 5, 2 ** 31, -1][pick(r, 4)], content: [5, "", "<x>", null][pick(r, 4)], special: true });
      return;
    case 5:
      if (Array.isArray(t.model.merges)) t.model.merges[pick(r, t.model.merges.length)] = [[1, "a"], "a b c", "zz", ["q", "z"], "ab"][pick(r, 5)];
      return;
    case 6: {
      let pt: unknown = { type: "Whitespace" };
      for (let i = 0, d = [3, 6, 40][pick(r, 3)]!; i < d; i++) pt = { type: "Sequence", pretokenizers: [pt] };
      t.pre_tokenizer = pt;
      return;
    }
    default:
      t.model.unk_token = [null, 5, "[NOPE]"][pick(r, 3)];
      if (t.model.type === "Unigram") t.model.unk_id = [null, 999, -1][pick(r, 3)];
  }
}

let tokSeeds: string[] | null = null;
const tokenizer: Reader = {
  async prepare(dir) {
    tokenizerSeeds().forEach((s, i) => writeFileSync(join(dir, `tok${i}.json`), JSON.stringify(s)));
  },
  async one(dir, work, r) {
    tokSeeds ??= [0, 1, 2].map((i) => text(join(dir, `tok${i}.json`)));
    const seed = tokSeeds[pick(r, 3)]!;
    let out: string;
    const k = pick(r, 6);
    if (k <= 1) {
      const t = JSON.parse(seed);
      tokenizerEdit(t, r);
      out = JSON.stringify(t);
    } else if (k === 2) out = protoKey(seed, r);
    else if (k === 3) out = new TextDecoder().decode(mutateBytes(new TextEncoder().encode(seed), r));
    else {
      const v = JSON.parse(seed);
      mutateTree(v, r, false);
      out = spliceJson(JSON.stringify(v), r);
    }
    const d = join(work, "tok");
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "tokenizer.json"), out);
    const tok = HfTokenizer.load(d);
    const ids = tok.encode(TEXT);
    if (ids.length > 0) tok.decode(ids.subarray(0, 200));
  },
};

export const READERS: Record<string, Reader> = { safetensors, rankFile, deepspeed, jobConfig, hubConfig, manifest, tokenizer };
