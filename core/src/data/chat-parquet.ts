/**
 * Parquet datasets (the Hub's own format for datasets): read by npm `hyparquet` with the codecs of
 * `hyparquet-compressors` (snappy, gzip, brotli, zstd, lz4; both pinned in core/package.json), the
 * rows as objects — a chat table's `messages` column of {role, content} structs, alpaca's
 * instruction/input/output columns, sharegpt's `conversations`, or a `text` column — then checked
 * as chat-formats.ts checks JSONL records (errors name the file, the row and the field).
 *
 * The file is read whole, at most {@link MAX_PARQUET_BYTES}, and its footer's row count is bounded
 * ({@link MAX_PARQUET_ROWS}) before any column is decoded.
 */
import { readFileSync, statSync } from "node:fs";
import { parquetMetadata, parquetReadObjects } from "hyparquet";
import { compressors } from "hyparquet-compressors";
import { DataError, notFound } from "./sources.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";

/** Largest parquet dataset, bytes (read whole; its decoded rows are held in memory). */
export const MAX_PARQUET_BYTES = 1 << 30;
/** Most rows of a parquet dataset. */
export const MAX_PARQUET_ROWS = 10_000_000;

/** Values of a parquet row as plain JSON-like values (bigint → number, dates → ISO strings). */
function plain(v: unknown): unknown {
  if (typeof v === "bigint") return Number(v);
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === "object" && !(v instanceof Uint8Array)) {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) o[k] = plain(x);
    return o;
  }
  return v;
}

/**
 * The rows of the parquet file `path` as objects (column name → value).
 * @throws DataError naming the file: missing, not a regular file, over {@link MAX_PARQUET_BYTES}
 *   or {@link MAX_PARQUET_ROWS}, not parquet, or not decodable (an unknown codec, a damaged page).
 */
export async function readParquetRows(path: string): Promise<Record<string, unknown>[]> {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw notFound(path);
  }
  if (!st.isFile()) throw new DataError(`data.dataset: ${pathForMessage(path)} is not a regular file`);
  if (st.size > MAX_PARQUET_BYTES) throw new DataError(`${pathForMessage(path)}: ${st.size} bytes is over the ${MAX_PARQUET_BYTES}-byte limit of a parquet dataset (split it)`);
  const bytes = readFileSync(path);
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const fail = (e: unknown) => new DataError(`${pathForMessage(path)}: not a readable parquet file (${quoteUntrusted((e as Error).message ?? String(e), QUOTE_MESSAGE_CHARS)})`);
  let metadata;
  try {
    metadata = parquetMetadata(file);
  } catch (e) {
    throw fail(e);
  }
  const rows = Number(metadata.num_rows);
  if (!(rows <= MAX_PARQUET_ROWS)) throw new DataError(`${pathForMessage(path)}: ${rows} rows is over the limit of ${MAX_PARQUET_ROWS}`);
  try {
    const out = await parquetReadObjects({ file, metadata, compressors });
    return out.map((r) => plain(r) as Record<string, unknown>);
  } catch (e) {
    throw fail(e);
  }
}
