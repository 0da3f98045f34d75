/**
 * The chat keys of the `data` section (core/src/config/resolve.ts checkChatKeys): set on a dataset
 * that cannot be chat data, or naming a template file that is not there, they are config errors
 * (reported with the others, before any backend starts) naming the key; a chat job resolves.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveJobConfig } from "../../../src/config/index.ts";
import { ConfigError } from "../../../src/config/errors.ts";

const MODEL = { model_type: "llama", vocab_size: 256, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 1, num_attention_heads: 2, max_position_embeddings: 64 };
const dir = mkdtempSync(join(tmpdir(), "zeromoe-chat-config-"));
const chat = join(dir, "chat.jsonl");
writeFileSync(chat, "");
const tmpl = join(dir, "t.jinja");
writeFileSync(tmpl, "{{ messages }}");

function issues(data: Record<string, unknown>): { path: string; message: string }[] {
  try {
    resolveJobConfig({ model: MODEL, data: { tokenizer: "byte", ...data }, train_batch_size: 1 });
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.issues.map((i) => ({ path: i.path, message: i.message }));
  }
}

describe("chat keys in the job", () => {
  test("a chat job resolves with its keys", () => {
    const { config } = resolveJobConfig({ model: MODEL, data: { dataset: chat, tokenizer: "byte", format: "messages", chat_template: tmpl, packing: true }, train_batch_size: 1 });
    expect(config.data).toMatchObject({ format: "messages", chat_template: tmpl, packing: true, train_on_prompt: false });
    expect(issues({ dataset: chat, chat_template: "tool_use" })).toEqual([]);
  });
  test("chat keys on plain text, and a missing template file, are named", () => {
    expect(issues({ dataset: "moby-dick", packing: true, train_on_prompt: true })).toEqual([
      { path: "data.train_on_prompt", message: 'data.train_on_prompt applies to chat data (a .jsonl or .parquet dataset of messages, alpaca or sharegpt records), but data.dataset is "moby-dick"' },
      { path: "data.packing", message: 'data.packing applies to chat data (a .jsonl or .parquet dataset of messages, alpaca or sharegpt records), but data.dataset is "moby-dick"' },
    ]);
    expect(issues({ dataset: join(dir, "notes.txt"), format: "alpaca" }).map((i) => i.path)).toEqual(["data.format"]);
    expect(issues({ dataset: chat, format: "text", packing: true })[0]!.message).toContain('data.format "text" reads');
    const missing = issues({ dataset: chat, chat_template: join(dir, "nope.jinja") });
    expect(missing.map((i) => i.path)).toEqual(["data.chat_template"]);
    expect(missing[0]!.message).toContain("is not a file");
  });
});
