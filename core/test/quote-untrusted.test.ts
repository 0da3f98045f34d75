/**
 * Untrusted strings in messages (issue 36): every reader's error path renders a name or value it
 * read through config/quote-untrusted.ts, so a message stays one bounded line whatever the input.
 * Each case feeds a name with terminal escapes, a newline with a fake `error:` line and a bidi
 * override, and a 10 MB name, through one reader, and checks the message: no raw control, bidi or
 * lone-surrogate character, lines under 1,000 characters, and the hostile text shown escaped (or, at
 * 10 MB, as a prefix and its length). Before the fix the shard name, record name, unit name,
 * data.tokenizer, dataset path and CLI arguments were echoed as they were (a 10 MB name made a
 * 10 MB line; ESC sequences reached the terminal).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decode as cborDecode, encode as cborEncode } from "cbor-x";
import { HubCheckpoint } from "../src/checkpoint/hub-dir.ts";
import { checkModelMatches } from "../src/checkpoint/load.ts";
import { locateCheckpoint } from "../src/checkpoint/manifest.ts";
import { crc32, RecordFileReader, RecordFileWriter } from "../src/checkpoint/record-file.ts";
import { parseSafetensorsBytes } from "../src/checkpoint/safetensors.ts";
import { ShardSource } from "../src/checkpoint/shard-source.ts";
import type { CheckpointManifest } from "../src/checkpoint/manifest.ts";
import { parseTrainArgs } from "../src/cli/args.ts";
import { parseOptions } from "../src/cli/inference-args.ts";
import { parseJsonConfig, resolveJobConfig } from "../src/config/resolve.ts";
import { describeValue } from "../src/config/json-bounds.ts";
import { pathForMessage, QUOTE_CHARS, quoteUntrusted } from "../src/config/quote-untrusted.ts";
import { loadCorpus } from "../src/data/sources.ts";
import { ByteTokenizer, createTokenizer } from "../src/data/tokenizer.ts";
import { tinyJob } from "./engine/fixtures.ts";

const ROOT = mkdtempSync(join(tmpdir(), "zeromoe-quote-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

/** ESC sequences (clear screen, red), a newline and a fake error line, a right-to-left override. */
const EVIL = "w\u001b[2J\u001b[31m\nerror: all good\u202e\u0085";
const BIG = "n".repeat(10 << 20);

/** Characters no message may hold raw (newline aside: ConfigError lists issues one per line). */
const RAW_UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The message of what `f` throws (sync or async). */
async function messageOf(f: () => unknown): Promise<string> {
  try {
    await f();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("expected an error");
}

/** `msg` is bounded and holds nothing raw; with `evil`, the hostile name is shown escaped. */
function checkQuoted(msg: string, kind: "evil" | "big"): void {
  expect(msg.length, msg.slice(0, 300)).toBeLessThan(4000); // the train CLI's usage text included
  for (const line of msg.split("\n")) expect(line.length, line.slice(0, 300)).toBeLessThan(1000);
  expect(RAW_UNSAFE.test(msg), JSON.stringify(msg)).toBe(false);
  if (kind === "evil") {
    expect(msg).toContain("w\\u001b[2J\\u001b[31m\\nerror: all good");
    for (const line of msg.split("\n")) expect(line).not.toStartWith("error: all good");
  } else {
    expect(msg).toContain("characters)");
  }
}

describe("quoteUntrusted", () => {
  test("escapes, cuts at 40 characters with the length, keeps valid pairs, work bounded by the cut", () => {
    expect(quoteUntrusted("plain name.weight")).toBe('"plain name.weight"');
    expect(quoteUntrusted('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(quoteUntrusted("\u001b[2J\n\r\t\u007f\u009b\u2028\u2066\ufeff")).toBe('"\\u001b[2J\\n\\r\\t\\u007f\\u009b\\u2028\\u2066\\ufeff"');
    expect(quoteUntrusted("x".repeat(41))).toBe(`"${"x".repeat(40)}…" (41 characters)`);
    expect(quoteUntrusted("x".repeat(40))).toBe(`"${"x".repeat(40)}"`);
    expect(quoteUntrusted("😀b")).toBe('"😀b"');
    expect(quoteUntrusted("\ud800b\udc00")).toBe('"\\ud800b\\udc00"');
    // a cut through a surrogate pair leaves an unpaired half: escaped, not sent raw
    expect(quoteUntrusted("x".repeat(39) + "😀")).toBe(`"${"x".repeat(39)}\\ud83d…" (41 characters)`);
    expect(quoteUntrusted(BIG)).toBe(`"${"n".repeat(QUOTE_CHARS)}…" (10485760 characters)`);
    expect(describeValue(EVIL)).toBe(quoteUntrusted(EVIL));
  });

  test("pathForMessage: a plain path as it is, anything else quoted and bounded", () => {
    expect(pathForMessage("/ckpt/global_step10/rank_00000.zmck")).toBe("/ckpt/global_step10/rank_00000.zmck");
    expect(pathForMessage(`/d/${EVIL}`)).toBe(quoteUntrusted(`/d/${EVIL}`, 512));
    expect(pathForMessage(`/d/${BIG}`).length).toBeLessThan(600);
  });
});

describe("every reader's error path quotes what it read", () => {
  test("safetensors header: a tensor name with escapes / of 10 MB", async () => {
    for (const [name, kind] of [[EVIL, "evil"], [BIG, "big"]] as const) {
      const json = new TextEncoder().encode(JSON.stringify({ [name]: { dtype: "F128", shape: [1], data_offsets: [0, 4] } }));
      const file = new Uint8Array(8 + json.length + 4);
      new DataView(file.buffer).setUint32(0, json.length, true);
      file.set(json, 8);
      checkQuoted(await messageOf(() => parseSafetensorsBytes(file, "hand")), kind);
    }
  });

  test("model.safetensors.index.json: a shard name that does not exist", async () => {
    for (const [name, kind] of [[EVIL, "evil"], [`${"s".repeat(200)}\u001b`, "big"]] as const) {
      const d = join(ROOT, `hub-${kind}`);
      mkdirSync(d);
      writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: { "w.weight": name } }));
      checkQuoted(await messageOf(() => HubCheckpoint.open(d)), kind);
    }
  });

  /** A rank file whose one record is renamed to `name` in the index (CRC recomputed). */
  function rankFileNamed(name: string, file: string): string {
    const f = join(ROOT, file);
    const w = RecordFileWriter.create(f, 0, { tag: "t", worldSize: 1, codec: "raw" });
    w.add("u/params/0", "f32", 0, 2, new Uint8Array(new Float32Array([1, 2]).buffer));
    w.finish(0);
    const b = readFileSync(f);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const off = Number(dv.getBigUint64(b.length - 24, true));
    const len = dv.getUint32(b.length - 16, true);
    const index = cborDecode(b.subarray(off, off + len)) as { records: Record<string, unknown>[] };
    index.records[0]!.name = name;
    index.records[0]!.codec = "zstd"; // an index entry the reader refuses, naming the record
    const idx = cborEncode(index) as Uint8Array;
    const out = new Uint8Array(off + idx.length + 24);
    out.set(b.subarray(0, off));
    out.set(idx, off);
    const o = new DataView(out.buffer);
    o.setBigUint64(off + idx.length, BigInt(off), true);
    o.setUint32(off + idx.length + 8, idx.length, true);
    o.setUint32(off + idx.length + 12, crc32(idx), true);
    out.set(b.subarray(b.length - 8), out.length - 8);
    writeFileSync(f, out);
    return f;
  }

  test("rank file: a record name", async () => {
    checkQuoted(await messageOf(() => RecordFileReader.open(rankFileNamed(EVIL, "evil.zmck"))), "evil");
    checkQuoted(await messageOf(() => RecordFileReader.open(rankFileNamed(`${"r".repeat(100)}\u001b`, "big.zmck"))), "big");
  });

  test("checkpoint: the tag in `latest`, a unit name the manifest lacks", async () => {
    for (const [tag, kind] of [[EVIL, "evil"], [BIG.slice(0, 4000), "big"]] as const) {
      const d = join(ROOT, `ckpt-${kind}`);
      mkdirSync(d);
      writeFileSync(join(d, "latest"), tag);
      checkQuoted(await messageOf(() => locateCheckpoint(d)), kind);
    }
    const src = new ShardSource(ROOT, { world_size: 0, units: [] } as unknown as CheckpointManifest);
    checkQuoted(await messageOf(() => src.unit(EVIL)), "evil");
    checkQuoted(await messageOf(() => src.unit(BIG)), "big");
  });

  test("resume: a re-signed manifest's parameter name the model does not have (checkModelMatches)", async () => {
    // before: `train --resume` echoed the manifest's name whole (70 KB, ESC sequences, a fake error line)
    const model = { modelUnits: [{ name: "layers.0", numel: 4, dtype: "f32", params: [{ name: "w", shape: [2, 2], offset: 0 }] }] };
    for (const [name, kind] of [[EVIL, "evil"], [BIG, "big"]] as const) {
      const m = { units: [{ name: "layers.0", numel: 4, dtype: "f32", params: [{ name, shape: [2, 2], offset: 0 }] }] };
      const msg = await messageOf(() => checkModelMatches(model as never, m as unknown as CheckpointManifest, "/c/manifest.json"));
      checkQuoted(msg, kind);
      expect(msg).toContain("field units[0].params[0]");
    }
  });

  test("data.dataset and data.tokenizer paths; a .jsonl line holding an ESC", async () => {
    for (const [name, kind] of [[EVIL, "evil"], [BIG, "big"]] as const) {
      checkQuoted(await messageOf(() => loadCorpus(`/nonexistent/${name}.txt`, new ByteTokenizer())), kind);
      checkQuoted(await messageOf(() => loadCorpus(`/nonexistent/${name}.csv`, new ByteTokenizer())), kind);
      checkQuoted(await messageOf(() => createTokenizer(`/nonexistent/${name}`)), kind);
    }
    const jsonl = join(ROOT, "esc.jsonl");
    writeFileSync(jsonl, `{"text": "ok"}\n\u001b[2J{"text": 1}\n`);
    const m = await messageOf(() => loadCorpus(jsonl, new ByteTokenizer()));
    expect(m).toContain("esc.jsonl:2: not valid JSON");
    expect(RAW_UNSAFE.test(m), JSON.stringify(m)).toBe(false);
  });

  test("job config: a value, a key and data.tokenizer", async () => {
    const job = tinyJob();
    for (const [v, kind] of [[EVIL, "evil"], [BIG, "big"]] as const) {
      checkQuoted(await messageOf(() => resolveJobConfig({ ...job, data: { ...(job.data as object), tokenizer: v } }, { source: "job.json" })), kind);
      checkQuoted(await messageOf(() => resolveJobConfig({ ...job, optimizer: { type: v, params: {} } }, { source: "job.json" })), kind);
    }
    checkQuoted(await messageOf(() => resolveJobConfig({ ...job, [EVIL]: 1 }, { source: "job.json" })), "evil");
    const m = await messageOf(() => parseJsonConfig(`{"a": \u001b}`, "job.json"));
    expect(RAW_UNSAFE.test(m), JSON.stringify(m)).toBe(false);
  });

  test("command-line arguments of train, generate and eval", async () => {
    for (const [v, kind] of [[EVIL, "evil"], [BIG.slice(0, 4000), "big"]] as const) {
      checkQuoted(await messageOf(() => parseTrainArgs([`--${v}`])), kind);
      checkQuoted(await messageOf(() => parseTrainArgs(["--backend", v])), kind);
      const usage = "usage: x";
      checkQuoted(await messageOf(() => parseOptions([`--${v}`], {}, usage)), kind);
      checkQuoted(await messageOf(() => parseOptions([v], {}, usage)), kind);
    }
  });
});
