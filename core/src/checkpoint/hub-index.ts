/**
 * The index of a sharded Hugging Face safetensors checkpoint (`model.safetensors.index.json`, as
 * written by Transformers' `save_pretrained`), read with its work bounded: the one reader both the
 * Hub-directory loader (hub-dir.ts) and the single-process loader (hf-load.ts) use.
 */
import { readFileSync, statSync } from "node:fs";
import { describeValue, scanJsonBounds } from "../config/json-bounds.ts";
import { findDuplicateJsonKey } from "../config/json-duplicate-keys.ts";
import { checkRegularFile, SAFETENSORS_JSON_LIMITS, SAFETENSORS_MAX_HEADER_BYTES, SafetensorsError } from "./safetensors.ts";
import { QUOTE_MESSAGE_CHARS, quoteUntrusted } from "../config/quote-untrusted.ts";

/** `weight_map` of a `model.safetensors.index.json` ({metadata, weight_map: {tensor name: file}}),
 * bounded before parsing (size, then depth/length via scanJsonBounds); every entry a plain file
 * name in the index's directory (no separator, NUL, "." or ".."); no key given twice in one object.
 * @throws SafetensorsError naming the index (and the tensor for a bad entry), also for an index that
 *   is not a regular file. */
export function readHubIndex(index: string): Map<string, string> {
  checkRegularFile(index, "a model.safetensors.index.json file");
  if (statSync(index).size > SAFETENSORS_MAX_HEADER_BYTES) throw new SafetensorsError(index, `index is over the ${SAFETENSORS_MAX_HEADER_BYTES}-byte limit`);
  const text = readFileSync(index, "utf8");
  const over = scanJsonBounds(text, { ...SAFETENSORS_JSON_LIMITS, maxDepth: 8 });
  if (over !== null) throw new SafetensorsError(index, `index ${over.path === "" ? "" : `at ${over.path} `}is out of bounds: ${over.message}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError(index, `index is not valid JSON (${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)})`);
  }
  const dup = findDuplicateJsonKey(text);
  if (dup !== null) throw new SafetensorsError(index, `index holds duplicate key ${describeValue(dup.key)}${dup.path === "" ? "" : ` in ${dup.path}`} (readers disagree on which one wins)`);
  const map = (parsed as { weight_map?: unknown } | null)?.weight_map;
  if (map === null || typeof map !== "object" || Array.isArray(map)) throw new SafetensorsError(index, "expected an object field weight_map {name: file}");
  const out = new Map<string, string>();
  for (const [name, f] of Object.entries(map as Record<string, unknown>)) {
    if (typeof f !== "string" || f.includes("/") || f.includes("\\") || f.includes("\0") || f === ".." || f === "." || f === "") {
      throw new SafetensorsError(index, `weight_map entry must be a plain file name in the same directory, got ${describeValue(f)}`, name);
    }
    out.set(name, f);
  }
  return out;
}
