/**
 * A chat dataset of a job, ready for the loader (docs/fine-tuning.md): the .jsonl records
 * (chat-formats.ts) rendered with the chat template (chat-template.ts, in a watched worker:
 * chat-render.ts), masked to the assistant turns (chat-masking.ts), tokenized and laid into rows,
 * packed or padded (chat-rows.ts).
 */
import type { DataConfig } from "../config/types.ts";
import { parseChatJsonl, parseChatRows, type ChatFormat, type Conversation } from "./chat-formats.ts";
import { readParquetRows } from "./chat-parquet.ts";
import { renderConversationPieces, DEFAULT_RENDER_STALL_MS } from "./chat-render.ts";
import { chatRows, tokenizePieces, type ChatRows } from "./chat-rows.ts";
import { loadChatTemplate } from "./chat-template.ts";
import { DataError, MAX_TEXT_DATASET_BYTES, notFound } from "./sources.ts";
import type { Tokenizer } from "./tokenizer.ts";
import { pathForMessage } from "../config/quote-untrusted.ts";
import { readFileSync, statSync } from "node:fs";

/** A chat corpus: its rows and where its template came from. */
export interface ChatCorpus {
  name: string;
  rows: ChatRows;
  /** The template's origin (file, or tokenizer_config.json chat_template). */
  template: string;
}

/** A parquet dataset of plain text: its `text` column, one document per row. */
export interface ParquetText {
  name: string;
  texts: string[];
}

/** The `text` column of parquet rows. @throws DataError naming the row. */
function textColumn(rows: readonly Record<string, unknown>[], path: string): string[] {
  return rows.map((r, i) => {
    const t = r.text;
    if (typeof t !== "string") throw new DataError(`${pathForMessage(path)} row ${i + 1}: column "text": expected a string, got ${t === null ? "null" : typeof t}`);
    return t;
  });
}

/** The pad id: tokenizer_config.json's pad_token when it encodes to one id, else the eos token, else the document separator, else 0. */
function padId(tok: Tokenizer, pad: string, eos: string): number {
  for (const s of [pad, eos]) {
    if (s === "") continue;
    const ids = tok.encode(s);
    if (ids.length === 1) return ids[0]!;
  }
  return tok.documentSeparator[0] ?? 0;
}

/**
 * The chat corpus of `data`, or null when the dataset is not chat data (`format` "text", or
 * "auto" with a dataset that is not .jsonl / .parquet or whose first record has a `text` field);
 * a parquet dataset of text comes back as its `text` column ({@link ParquetText}).
 * @throws DataError naming the file, line (row) and field (chat-formats.ts), the template
 *   (missing, failing, looping past `stallMs`), or a chat `format` on a dataset that is neither
 *   .jsonl nor .parquet.
 */
export async function loadChatCorpus(data: DataConfig, tok: Tokenizer, stallMs = DEFAULT_RENDER_STALL_MS): Promise<ChatCorpus | ParquetText | null> {
  const format = data.format ?? "auto";
  const parquet = data.dataset.endsWith(".parquet");
  if (format === "text" && !parquet) return null;
  if (!data.dataset.endsWith(".jsonl") && !parquet) {
    if (format === "auto") return null;
    throw new DataError(`data.format "${format}" needs a .jsonl or .parquet dataset, got data.dataset ${pathForMessage(data.dataset)}`);
  }
  let parsed: Conversation[] | { text: true };
  if (parquet) {
    const rows = await readParquetRows(data.dataset);
    if (format === "text") return { name: data.dataset, texts: textColumn(rows, data.dataset) };
    parsed = parseChatRows(rows, data.dataset, format as "auto" | ChatFormat);
    if (!Array.isArray(parsed)) return { name: data.dataset, texts: textColumn(rows, data.dataset) };
  } else {
    let size: number;
    try {
      const st = statSync(data.dataset);
      if (!st.isFile()) throw new DataError(`data.dataset: ${pathForMessage(data.dataset)} is not a regular file`);
      size = st.size;
    } catch (e) {
      if (e instanceof DataError) throw e;
      throw notFound(data.dataset);
    }
    if (size > MAX_TEXT_DATASET_BYTES) throw new DataError(`${pathForMessage(data.dataset)}: ${size} bytes is over the ${MAX_TEXT_DATASET_BYTES}-byte limit of a .jsonl dataset`);
    parsed = parseChatJsonl(readFileSync(data.dataset, "utf8"), data.dataset, format as "auto" | ChatFormat);
    if (!Array.isArray(parsed)) return null;
  }
  const spec = loadChatTemplate(data.tokenizer, data.chat_template ?? null);
  const pieces = await renderConversationPieces(spec, parsed, pathForMessage(data.dataset), data.train_on_prompt ?? false, stallMs);
  const examples = pieces.map((p) => tokenizePieces(p, tok));
  const rows = chatRows(examples, data.seq_len, data.packing ?? false, padId(tok, spec.specials.pad_token, spec.specials.eos_token));
  // every example cut before its first scored token: the run would train on nothing (aux loss only)
  if (rows.scored === 0) {
    const longest = examples.reduce((a, e) => Math.max(a, e.ids.length), 0);
    throw new DataError(`data.seq_len: ${data.seq_len} tokens leave no ${data.train_on_prompt ? "" : "assistant "}token to train on in ${pathForMessage(data.dataset)} (${rows.truncated} of ${examples.length} examples cut to seq_len; the longest is ${longest} tokens); raise data.seq_len`);
  }
  return { name: data.dataset, rows, template: spec.origin };
}
