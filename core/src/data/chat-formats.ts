/**
 * Chat and instruction datasets in the three common JSONL shapes (docs/fine-tuning.md "Formats"),
 * read into one form: a conversation of `{ role, content }` messages with roles system / user /
 * assistant, as Transformers' `apply_chat_template` takes them.
 *
 * - `messages`: `{"messages": [{"role": "system"|"user"|"assistant", "content": "…"}, …]}`
 *   (the OpenAI / TRL conversational shape).
 * - `alpaca`: `{"instruction": "…", "input": "…"?, "output": "…", "system": "…"?}`: one user turn
 *   (the instruction, then a blank line and the input when the input is not empty) and one
 *   assistant turn (the output).
 * - `sharegpt`: `{"conversations": [{"from": "system"|"human"|"user"|"gpt"|"assistant", "value": "…"}, …],
 *   "system": "…"?}`; human → user, gpt → assistant.
 *
 * Every record is checked before anything is rendered: line length and number of turns are
 * bounded first ({@link MAX_CHAT_LINE_CHARS}, {@link MAX_CHAT_TURNS}), then each field; an error
 * names the file, the 1-based line and the field.
 */
import { DataError } from "./sources.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";

/** A role of a chat message. */
export type ChatRole = "system" | "user" | "assistant";

/** One message, as chat templates read it. */
export interface ChatMessage {
  role: ChatRole;
  content: string;
}

/** One conversation of a dataset, with where it came from (for messages). */
export interface Conversation {
  messages: ChatMessage[];
  /** 1-based line of the dataset file. */
  line: number;
}

/** The record shapes of a chat dataset. */
export type ChatFormat = "messages" | "alpaca" | "sharegpt";

/** `data.format` values: the chat shapes, `text` (a `text` field per line) or `auto` (by the first record's keys). */
export type DataFormat = "auto" | "text" | ChatFormat;

/** Longest line of a chat JSONL file, characters (a record is parsed whole). */
export const MAX_CHAT_LINE_CHARS = 4 << 20;
/** Most messages in one conversation (masking renders the conversation once per assistant turn). */
export const MAX_CHAT_TURNS = 256;

const ROLE_OF_SHAREGPT: Readonly<Record<string, ChatRole>> = { system: "system", human: "user", user: "user", gpt: "assistant", assistant: "assistant" };

/** The format a record's keys indicate, or null when none (auto detection). */
export function detectFormat(rec: Record<string, unknown>): "text" | ChatFormat | null {
  if ("messages" in rec) return "messages";
  if ("conversations" in rec) return "sharegpt";
  if ("instruction" in rec) return "alpaca";
  if ("text" in rec) return "text";
  return null;
}

/** A record of one JSONL line as an object, or a DataError naming file and line. */
function parseRecord(line: string, where: string): Record<string, unknown> {
  if (line.length > MAX_CHAT_LINE_CHARS) throw new DataError(`${where}: the line is ${line.length} characters, over the ${MAX_CHAT_LINE_CHARS}-character limit of one record`);
  let obj: unknown;
  try {
    obj = JSON.parse(line);
  } catch (e) {
    throw new DataError(`${where}: not valid JSON (${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)})`);
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new DataError(`${where}: expected a JSON object, got ${Array.isArray(obj) ? "an array" : obj === null ? "null" : typeof obj}`);
  return obj as Record<string, unknown>;
}

function kindOf(v: unknown): string {
  if (v === undefined) return "nothing (the field is missing)";
  return v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** "an" before a vowel ("an alpaca record"), else "a". */
function article(word: string): string {
  return /^[aeiou]/i.test(word) ? "an" : "a";
}

function str(rec: Record<string, unknown>, key: string, where: string, optional: boolean): string | undefined {
  const v = rec[key];
  // an optional field may be null (tables and exported datasets write a missing value so)
  if ((v === undefined || v === null) && optional) return undefined;
  if (typeof v !== "string") throw new DataError(`${where}: field "${key}": expected a string, got ${v === undefined ? "nothing (the field is missing)" : kindOf(v)}`);
  return v;
}

function turns(rec: Record<string, unknown>, key: string, where: string): Record<string, unknown>[] {
  const v = rec[key];
  if (!Array.isArray(v)) throw new DataError(`${where}: field "${key}": expected an array of turns, got ${v === undefined ? "nothing" : kindOf(v)}`);
  if (v.length === 0) throw new DataError(`${where}: field "${key}" is empty (expected at least one turn)`);
  if (v.length > MAX_CHAT_TURNS) throw new DataError(`${where}: field "${key}" has ${v.length} turns, over the limit of ${MAX_CHAT_TURNS}`);
  v.forEach((t, i) => {
    if (typeof t !== "object" || t === null || Array.isArray(t)) throw new DataError(`${where}: ${key}[${i}]: expected an object, got ${kindOf(t)}`);
  });
  return v as Record<string, unknown>[];
}

/** The conversation of one record of a known chat format; checks roles and turn order.
 * @throws DataError naming `where` (file:line) and the field. */
export function recordToMessages(rec: Record<string, unknown>, format: ChatFormat, where: string): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (format === "messages") {
    turns(rec, "messages", where).forEach((t, i) => {
      const role = t.role;
      if (role !== "system" && role !== "user" && role !== "assistant") throw new DataError(`${where}: messages[${i}].role: expected "system", "user" or "assistant", got ${typeof role === "string" ? quoteUntrusted(role) : kindOf(role)}`);
      const content = t.content;
      if (typeof content !== "string") throw new DataError(`${where}: messages[${i}].content: expected a string, got ${content === undefined ? "nothing (the field is missing)" : kindOf(content)}`);
      out.push({ role, content });
    });
  } else if (format === "sharegpt") {
    const system = str(rec, "system", where, true);
    if (system !== undefined && system !== "") out.push({ role: "system", content: system });
    turns(rec, "conversations", where).forEach((t, i) => {
      const from = t.from;
      const role = typeof from === "string" && Object.hasOwn(ROLE_OF_SHAREGPT, from) ? ROLE_OF_SHAREGPT[from]! : null;
      if (role === null) throw new DataError(`${where}: conversations[${i}].from: expected "system", "human", "gpt", "user" or "assistant", got ${typeof from === "string" ? quoteUntrusted(from) : kindOf(from)}`);
      const value = t.value;
      if (typeof value !== "string") throw new DataError(`${where}: conversations[${i}].value: expected a string, got ${value === undefined ? "nothing (the field is missing)" : kindOf(value)}`);
      out.push({ role, content: value });
    });
  } else {
    const system = str(rec, "system", where, true);
    const instruction = str(rec, "instruction", where, false)!;
    const input = str(rec, "input", where, true);
    const output = str(rec, "output", where, false)!;
    if (system !== undefined && system !== "") out.push({ role: "system", content: system });
    out.push({ role: "user", content: input !== undefined && input !== "" ? `${instruction}\n\n${input}` : instruction });
    out.push({ role: "assistant", content: output });
  }
  const field = format === "messages" ? "messages" : format === "sharegpt" ? "conversations" : "system";
  out.forEach((m, i) => {
    if (m.role === "system" && i > 0) throw new DataError(`${where}: ${field}: a system message is allowed only as the first turn (turn ${i} is one)`);
  });
  if (!out.some((m) => m.role === "assistant")) throw new DataError(`${where}: ${field}: no assistant turn (nothing to train on)`);
  return out;
}

/** Conversations being collected from records (JSONL lines, parquet rows), one format. */
class ChatCollector {
  readonly out: Conversation[] = [];
  private fmt: ChatFormat | null;
  constructor(private readonly format: "auto" | ChatFormat) {
    this.fmt = format === "auto" ? null : format;
  }

  /** Adds record `rec` found at `where` (number `line`); returns true when, first and "auto", it is a text record (a plain-text dataset). */
  add(rec: Record<string, unknown>, where: string, line: number): boolean {
    const seen = detectFormat(rec);
    if (this.fmt === null) {
      if (seen === "text") return true;
      if (seen === null) throw new DataError(`${where}: cannot tell the record's format: expected a "messages", "conversations", "instruction" or "text" field, got fields ${quoteUntrusted(Object.keys(rec).slice(0, 8).join(", "))}`);
      this.fmt = seen;
    } else if (seen !== this.fmt && !(this.fmt === "alpaca" && seen === null)) {
      throw new DataError(`${where}: expected ${article(this.fmt)} ${this.fmt} record (as ${this.format === "auto" ? "the first record" : "data.format"} says), got ${seen === null ? "one with none of the known fields" : `${article(seen)} ${seen} record`}`);
    }
    this.out.push({ messages: recordToMessages(rec, this.fmt, where), line });
    return false;
  }
}

/**
 * Parses a chat JSONL text into conversations. `format` "auto" takes the shape of the first
 * record (its `messages`, `conversations` or `instruction` key); every record must have it.
 * Blank lines are skipped.
 * @returns the conversations, or `{ text: true }` when `format` is "auto" and the first record has a `text` field (a plain-text dataset)
 * @throws DataError naming the file, line and field: bad JSON, a line over
 *   {@link MAX_CHAT_LINE_CHARS}, more than {@link MAX_CHAT_TURNS} turns, a wrong type or role, a
 *   record of another shape, no assistant turn, no records.
 */
export function parseChatJsonl(text: string, path: string, format: "auto" | ChatFormat): Conversation[] | { text: true } {
  const c = new ChatCollector(format);
  let start = 0;
  for (let i = 0; start <= text.length; i++) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const where = `${pathForMessage(path)}:${i + 1}`;
    // the length bound comes before trimming or parsing
    if (end - start > MAX_CHAT_LINE_CHARS) throw new DataError(`${where}: the line is ${end - start} characters, over the ${MAX_CHAT_LINE_CHARS}-character limit of one record`);
    const line = text.slice(start, end).trim();
    start = end + 1;
    if (line === "") continue;
    if (c.add(parseRecord(line, where), where, i + 1)) return { text: true };
  }
  if (c.out.length === 0) throw new DataError(`${pathForMessage(path)}: no conversations (expected one JSON object per line)`);
  return c.out;
}

/**
 * Conversations of table rows (a parquet file's rows as objects, chat-parquet.ts); errors name
 * `path`, the 1-based row and the field. Same rules as {@link parseChatJsonl}.
 * @returns the conversations, or `{ text: true }` when "auto" and the first row has a `text` column
 */
export function parseChatRows(rows: readonly Record<string, unknown>[], path: string, format: "auto" | ChatFormat): Conversation[] | { text: true } {
  const c = new ChatCollector(format);
  for (let i = 0; i < rows.length; i++) if (c.add(rows[i]!, `${pathForMessage(path)} row ${i + 1}`, i + 1)) return { text: true };
  if (c.out.length === 0) throw new DataError(`${pathForMessage(path)}: no rows`);
  return c.out;
}
