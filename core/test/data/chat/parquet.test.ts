/**
 * Parquet datasets (core/src/data/chat-parquet.ts): files written here with hyparquet-writer (a
 * development dependency) in the Hub's layouts — a `messages` column of {role, content} structs
 * (a 3-level LIST), alpaca's flat columns with a null `input`, a `text` column — read back as the
 * conversations and documents the JSONL reader gives; errors name file, row and field.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parquetWriteBuffer } from "hyparquet-writer";
import { parseChatRows, type ChatMessage } from "../../../src/data/chat-formats.ts";
import { readParquetRows } from "../../../src/data/chat-parquet.ts";
import { loadChatCorpus, type ParquetText } from "../../../src/data/chat-corpus.ts";
import { DataLoader } from "../../../src/data/loader.ts";
import { ByteTokenizer } from "../../../src/data/tokenizer.ts";

const dir = mkdtempSync(join(tmpdir(), "zeromoe-parquet-"));
const STR = { type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "OPTIONAL" } as const;

const CHATS: ChatMessage[][] = [
  [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }],
  [{ role: "system", content: "S" }, { role: "user", content: "2+2?" }, { role: "assistant", content: "4" }, { role: "user", content: "3+3?" }, { role: "assistant", content: "6" }],
];

function write(name: string, buf: ArrayBuffer): string {
  const f = join(dir, name);
  writeFileSync(f, new Uint8Array(buf));
  return f;
}

function messagesFile(name: string, chats: unknown[][]): string {
  return write(name, parquetWriteBuffer({
    columnData: [{ name: "messages", data: chats }],
    schema: [
      { name: "root", num_children: 1 },
      { name: "messages", repetition_type: "OPTIONAL", converted_type: "LIST", num_children: 1 },
      { name: "list", repetition_type: "REPEATED", num_children: 1 },
      { name: "element", repetition_type: "OPTIONAL", num_children: 2 },
      { name: "role", ...STR },
      { name: "content", ...STR },
    ],
  } as never));
}

describe("parquet datasets", () => {
  test("messages structs, alpaca columns (null input) and a text column", async () => {
    const m = messagesFile("m.parquet", CHATS);
    expect(parseChatRows(await readParquetRows(m), m, "auto")).toEqual(CHATS.map((messages, i) => ({ messages, line: i + 1 })));
    const a = write("a.parquet", parquetWriteBuffer({
      columnData: [
        { name: "instruction", data: ["Translate", "Say hi"], type: "STRING" },
        { name: "input", data: ["chat", null], type: "STRING" },
        { name: "output", data: ["cat", "hi"], type: "STRING" },
      ],
    }));
    expect(parseChatRows(await readParquetRows(a), a, "auto")).toEqual([
      { line: 1, messages: [{ role: "user", content: "Translate\n\nchat" }, { role: "assistant", content: "cat" }] },
      { line: 2, messages: [{ role: "user", content: "Say hi" }, { role: "assistant", content: "hi" }] },
    ]);
    const t = write("t.parquet", parquetWriteBuffer({ columnData: [{ name: "text", data: ["one doc", "two doc"], type: "STRING" }] }));
    const tok = new ByteTokenizer();
    const base = { tokenizer: "byte", seq_len: 4, validation_fraction: 0 };
    expect((await loadChatCorpus({ ...base, dataset: t }, tok)) as ParquetText).toEqual({ name: t, texts: ["one doc", "two doc"] });
    const loader = await DataLoader.fromConfig({ ...base, dataset: t }, { micro: 1, accum: 1, worldSize: 1, rank: 0, seed: 1 });
    expect(loader.info.totalTokens).toBe("one doc\n\ntwo doc".length);
  });

  test("errors name the file, row and field", async () => {
    const bad = messagesFile("bad.parquet", [CHATS[0]!, [{ role: "user", content: "x" }, { role: "robot", content: "y" }]]);
    expect(() => parseChatRows([], bad, "auto")).toThrow(/no rows/);
    const rows = await readParquetRows(bad);
    expect(() => parseChatRows(rows, bad, "auto")).toThrow(/bad\.parquet row 2: messages\[1\]\.role: expected "system", "user" or "assistant", got "robot"/);
    const junk = join(dir, "junk.parquet");
    writeFileSync(junk, "PAR1 this is not parquet at all PAR1");
    await expect(readParquetRows(junk)).rejects.toThrow(/junk\.parquet: not a readable parquet file/);
    await expect(readParquetRows(join(dir, "missing.parquet"))).rejects.toThrow(/file not found/);
  });
});
