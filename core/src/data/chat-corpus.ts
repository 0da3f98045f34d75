/**
 * A chat dataset of a job, ready for the loader (docs/fine-tuning.md): the .jsonl records
 * (chat-formats.ts) rendered with the chat template (chat-template.ts, in a watched worker:
 * chat-render.ts), masked to the assistant turns (chat-masking.ts), tokenized and laid into rows,
 * packed or padded (chat-rows.ts).
 */
import type { DataConfig } from "../config/types.ts";
import { parseChatJsonl, type ChatFormat } from "./chat-formats.ts";
import { renderConversationPieces, DEFAULT_RENDER_STALL_MS } from "./chat-render.ts";
import { chatRows, tokenizePieces, type ChatRows } from "./chat-rows.ts";
import { loadChatTemplate } from "./chat-template.ts";
import { DataError, MAX_TEXT_DATASET_BYTES } from "./sources.ts";
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
 * "auto" with a dataset that is not .jsonl or whose first record has a `text` field).
 * @throws DataError naming the file, line and field (chat-formats.ts), the template (missing,
 *   failing, looping past `stallMs`), or a chat `format` on a dataset that is not .jsonl.
 */
export async function loadChatCorpus(data: DataConfig, tok: Tokenizer, stallMs = DEFAULT_RENDER_STALL_MS): Promise<ChatCorpus | null> {
  const format = data.format ?? "auto";
  if (format === "text") return null;
  if (!data.dataset.endsWith(".jsonl")) {
    if (format === "auto") return null;
    throw new DataError(`data.format "${format}" needs a .jsonl dataset, got data.dataset ${pathForMessage(data.dataset)}`);
  }
  let size: number;
  try {
    const st = statSync(data.dataset);
    if (!st.isFile()) throw new DataError(`data.dataset: ${pathForMessage(data.dataset)} is not a regular file`);
    size = st.size;
  } catch (e) {
    if (e instanceof DataError) throw e;
    throw new DataError(`data.dataset: file not found: ${pathForMessage(data.dataset)}`);
  }
  if (size > MAX_TEXT_DATASET_BYTES) throw new DataError(`${pathForMessage(data.dataset)}: ${size} bytes is over the ${MAX_TEXT_DATASET_BYTES}-byte limit of a .jsonl dataset`);
  const parsed = parseChatJsonl(readFileSync(data.dataset, "utf8"), data.dataset, format as "auto" | ChatFormat);
  if (!Array.isArray(parsed)) return null;
  const spec = loadChatTemplate(data.tokenizer, data.chat_template ?? null);
  const pieces = await renderConversationPieces(spec, parsed, pathForMessage(data.dataset), data.train_on_prompt ?? false, stallMs);
  const examples = pieces.map((p) => tokenizePieces(p, tok));
  const rows = chatRows(examples, data.seq_len, data.packing ?? false, padId(tok, spec.specials.pad_token, spec.specials.eos_token));
  return { name: data.dataset, rows, template: spec.origin };
}
