// Data pipeline: PRNG against an independent reference, determinism, disjointness across ranks,
// coverage of the global batch, resumption, file formats and their errors.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ByteTokenizer, DataError, DataLoader, DistributedSampler, Gpt2Tokenizer, Rng, loadCorpus, permutation, splitTokens, windowCount,
} from "../src/data/index.ts";

const dir = mkdtempSync(join(tmpdir(), "zeromoe-data-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("Rng (xoshiro128**)", () => {
  test("matches the reference sequence for state [1, 2, 3, 4]", () => {
    // Values from an independent Python implementation of xoshiro128** (Blackman & Vigna).
    const r = Rng.fromState([1, 2, 3, 4]);
    expect(Array.from({ length: 6 }, () => r.nextU32())).toEqual([11520, 0, 5927040, 70819200, 2031721883, 1637235492]);
  });
  test("same seed → same stream; different seeds differ; nextInt stays in range and is roughly uniform", () => {
    const a = new Rng(97), b = new Rng(97), c = new Rng(98);
    const sa = Array.from({ length: 50 }, () => a.nextU32());
    expect(Array.from({ length: 50 }, () => b.nextU32())).toEqual(sa);
    expect(Array.from({ length: 50 }, () => c.nextU32())).not.toEqual(sa);
    const counts = new Array(7).fill(0);
    const r = new Rng(5);
    for (let i = 0; i < 70000; i++) counts[r.nextInt(7)]++;
    for (const k of counts) expect(Math.abs(k - 10000)).toBeLessThan(500);
    expect(() => r.nextInt(0)).toThrow(/nextInt/);
  });
  test("permutation is a permutation", () => {
    const p = permutation(1009, new Rng(3));
    expect(Array.from(p).sort((x, y) => x - y)).toEqual(Array.from({ length: 1009 }, (_, i) => i));
  });
});

describe("DistributedSampler", () => {
  const geometry = { numWindows: 211, micro: 3, accum: 2, worldSize: 5, seed: 11 }; // 211 prime; G = 30 → 7 batches/epoch
  const ranks = Array.from({ length: 5 }, (_, rank) => new DistributedSampler({ ...geometry, rank }));

  test("ranks take disjoint micro-batches that together are exactly the global batch's windows", () => {
    for (let step = 0; step < 16; step++) {
      // 16 steps cross the epoch boundary at 7 and 14
      const seen: number[] = [];
      const epoch = ranks[0].state().epoch;
      const index = ranks[0].state().index;
      for (let a = 0; a < geometry.accum; a++) for (const s of ranks) seen.push(...s.next().windows);
      expect(new Set(seen).size).toBe(30);
      const order = ranks[0].epochOrder(epoch);
      expect(new Set(seen)).toEqual(new Set(order.slice(index * 30, index * 30 + 30)));
    }
  });
  test("rank r takes slots r, r+n, … of the global batch", () => {
    const s = new DistributedSampler({ ...geometry, rank: 2, shuffle: false });
    expect(Array.from(s.next().windows)).toEqual([6, 7, 8]); // slot 2
    expect(Array.from(s.next().windows)).toEqual([21, 22, 23]); // slot 2 + 5 = 7
    expect(Array.from(s.next().windows)).toEqual([36, 37, 38]); // next global batch, slot 2
  });
  test("an epoch visits distinct windows; epochs are shuffled differently; seed changes order", () => {
    const s = new DistributedSampler({ ...geometry, rank: 0 });
    const e0 = s.epochOrder(0).slice(), e1 = s.epochOrder(1).slice();
    expect(new Set(e0).size).toBe(211);
    expect(Array.from(e1)).not.toEqual(Array.from(e0));
    const other = new DistributedSampler({ ...geometry, rank: 0, seed: 12 });
    expect(Array.from(other.epochOrder(0))).not.toEqual(Array.from(e0));
  });
  test("state round trip resumes the same stream", () => {
    const a = new DistributedSampler({ ...geometry, rank: 4 });
    for (let i = 0; i < 13; i++) a.next();
    const b = new DistributedSampler({ ...geometry, rank: 4 });
    b.loadState(JSON.parse(JSON.stringify(a.state())));
    for (let i = 0; i < 20; i++) expect(Array.from(b.next().windows)).toEqual(Array.from(a.next().windows));
    expect(() => b.loadState({ epoch: 0, index: 7, micro: 0 })).toThrow(/index in \[0, 7\)/);
  });
  test("too few windows for one global batch is an error naming both numbers", () => {
    expect(() => new DistributedSampler({ ...geometry, numWindows: 29, rank: 0 })).toThrow(/29 windows are fewer than one global batch of 30/);
  });
});

describe("windows and split", () => {
  test("split keeps a contiguous tail; window count", () => {
    const t = Uint16Array.from({ length: 1013 }, (_, i) => i % 251);
    const s = splitTokens(t, 0.1);
    expect(s.validation.length).toBe(101);
    expect(s.train.length + s.validation.length).toBe(1013);
    expect(s.validation[0]).toBe(t[912]);
    expect(windowCount(17, 4)).toBe(4); // 16 inputs + 1 target
    expect(windowCount(16, 4)).toBe(3);
    expect(windowCount(4, 4)).toBe(0);
  });
});

describe("DataLoader", () => {
  // A random-byte .bin corpus: 5000 tokens.
  const r = new Rng(2024);
  const tokens = Uint16Array.from({ length: 5003 }, () => r.nextInt(256));
  const binPath = join(dir, "tokens.bin");
  writeFileSync(binPath, new Uint8Array(tokens.buffer));
  const data = { dataset: binPath, tokenizer: "byte" as const, seq_len: 13, validation_fraction: 0.07 };

  test("targets are inputs shifted by one, taken from the corpus at the window's offset", async () => {
    const dl = await DataLoader.fromConfig(data, { micro: 3, accum: 2, worldSize: 2, rank: 1, seed: 9 });
    const b = dl.nextMicroBatch();
    expect(b.inputs.length).toBe(3 * 13);
    for (let row = 0; row < 3; row++) {
      const start = b.windows[row] * 13;
      for (let i = 0; i < 13; i++) {
        expect(b.inputs[row * 13 + i]).toBe(tokens[start + i]);
        expect(b.targets[row * 13 + i]).toBe(tokens[start + i + 1]);
      }
    }
  });
  test("same seed and position → identical batches (determinism across instances)", async () => {
    const a = await DataLoader.fromConfig(data, { micro: 2, accum: 3, worldSize: 3, rank: 2, seed: 77 });
    const b = await DataLoader.fromConfig(data, { micro: 2, accum: 3, worldSize: 3, rank: 2, seed: 77 });
    for (let i = 0; i < 10; i++) expect(Array.from(b.nextMicroBatch().inputs)).toEqual(Array.from(a.nextMicroBatch().inputs));
    const c = await DataLoader.fromConfig(data, { micro: 2, accum: 3, worldSize: 3, rank: 2, seed: 78 });
    expect(Array.from(c.nextMicroBatch().inputs)).not.toEqual(Array.from(b.nextMicroBatch().inputs));
  });
  test("validation batches are disjoint across ranks, fixed, and come from the tail", async () => {
    const l0 = await DataLoader.fromConfig(data, { micro: 2, accum: 1, worldSize: 2, rank: 0, seed: 1 });
    const l1 = await DataLoader.fromConfig(data, { micro: 2, accum: 1, worldSize: 2, rank: 1, seed: 1 });
    const v0 = l0.validationBatches(), v1 = l1.validationBatches();
    const w0 = v0.flatMap((b) => Array.from(b.windows)), w1 = v1.flatMap((b) => Array.from(b.windows));
    expect(w0.filter((w) => w1.includes(w))).toEqual([]);
    expect(w0.length + w1.length).toBe(Math.floor(l0.info.validationWindows / 2) * 2);
    const valStart = l0.info.trainTokens;
    expect(v0[0].inputs[0]).toBe(tokens[valStart]);
    expect(Array.from(l0.validationBatches(2)[1].inputs)).toEqual(Array.from(v0[1].inputs));
  });
  test("too little data names the file and the tokens needed", async () => {
    const small = join(dir, "small.txt");
    writeFileSync(small, "call me ishmael ".repeat(7)); // 112 bytes
    const p = DataLoader.fromConfig({ dataset: small, tokenizer: "byte", seq_len: 16, validation_fraction: 0 }, { micro: 4, accum: 2, worldSize: 1, rank: 0, seed: 0 });
    await expect(p).rejects.toThrow(DataError);
    await expect(p).rejects.toThrow(/small\.txt: 112 tokens .* at least 129 tokens/);
  });
  test("missing file, odd .bin, out-of-vocabulary ids, bad jsonl and unknown extension are errors naming the file", async () => {
    const byte = new ByteTokenizer();
    await expect(loadCorpus(join(dir, "nope.txt"), byte)).rejects.toThrow(/file not found: .*nope\.txt/);
    writeFileSync(join(dir, "odd.bin"), new Uint8Array(7));
    await expect(loadCorpus(join(dir, "odd.bin"), byte)).rejects.toThrow(/odd\.bin: 7 bytes/);
    writeFileSync(join(dir, "big.bin"), new Uint8Array(new Uint16Array([5, 300]).buffer));
    await expect(loadCorpus(join(dir, "big.bin"), byte)).rejects.toThrow(/big\.bin: token 300 at index 1/);
    writeFileSync(join(dir, "bad.jsonl"), '{"text": "ok"}\n{"txt": 3}\n');
    await expect(loadCorpus(join(dir, "bad.jsonl"), byte)).rejects.toThrow(/bad\.jsonl:2: expected an object with a string "text"/);
    await expect(loadCorpus(join(dir, "x.csv"), byte)).rejects.toThrow(/\.txt, \.jsonl, \.parquet or \.bin/);
  });
  test("jsonl documents are joined with the tokenizer's separator", async () => {
    writeFileSync(join(dir, "docs.jsonl"), '{"text": "ab"}\n\n{"text": "é"}\n');
    const c = await loadCorpus(join(dir, "docs.jsonl"), new ByteTokenizer());
    expect(Array.from(c.tokens)).toEqual([97, 98, 10, 10, 0xc3, 0xa9]);
    const g = await loadCorpus(join(dir, "docs.jsonl"), new Gpt2Tokenizer());
    expect(g.tokens[1]).toBe(50256);
    expect(new Gpt2Tokenizer().decode(g.tokens)).toBe("ab<|endoftext|>é");
  });
  test("byte tokenizer on a non-UTF-8 .txt: the tokens are the file's bytes exactly (no U+FFFD)", async () => {
    // random bytes (Latin-1 text, stray continuation bytes, a BOM, NUL) at an awkward length
    const r = new Rng(31);
    const bytes = Uint8Array.from({ length: 1009 }, () => r.nextInt(256));
    bytes.set([0xef, 0xbb, 0xbf, 0xff, 0xfe, 0xe9, 0x80, 0x00, 0xc3], 0);
    writeFileSync(join(dir, "latin1.txt"), bytes);
    const c = await loadCorpus(join(dir, "latin1.txt"), new ByteTokenizer());
    expect(c.tokens).toBeInstanceOf(Uint16Array);
    expect(Array.from(c.tokens)).toEqual(Array.from(bytes));
    expect(c.documents).toBe(1);
    // gpt2 still reads the text (decoded as UTF-8)
    writeFileSync(join(dir, "utf8.txt"), "héllo wörld");
    expect(new Gpt2Tokenizer().decode((await loadCorpus(join(dir, "utf8.txt"), new Gpt2Tokenizer())).tokens)).toBe("héllo wörld");
  });
  test("built-in Moby Dick loads offline", async () => {
    const c = await loadCorpus("moby-dick", new ByteTokenizer());
    expect(c.tokens.length).toBeGreaterThan(1_000_000);
    expect(new ByteTokenizer().decode(c.tokens.subarray(0, 20))).toContain("Loomings");
  });
});
