/**
 * Duplicate object keys in untrusted JSON text. `JSON.parse` keeps the last of two equal keys
 * silently, while other readers of the same file keep the first or refuse it: the safetensors format
 * forbids duplicate keys (its README, "Notes"; the reference implementation parses with serde and
 * refuses them), and DeepSpeed loads its config with `object_pairs_hook=
 * dict_raise_error_on_duplicate_keys` ("Duplicate keys in DeepSpeed config"). So a file with a
 * repeated key means different things to different programs (a parser differential, Trail of Bits'
 * safetensors audit TOB-SFTN-7): we refuse it, naming the key.
 *
 * Keys are compared decoded (`"a"` and `"\u0061"` are the same key). The scan is iterative and
 * linear in the text; call it after `JSON.parse` succeeded (it does not validate syntax) and after
 * config/json-bounds.ts bounded depth and key length, so its stack and each decoded key are bounded.
 */

import { quoteUntrusted } from "./quote-untrusted.ts";

/** The first repeated key: its JSON path (the object holding it, `""` = the root) and the key. */
export interface DuplicateJsonKey {
  /** Path of the object that holds the key twice, like `zero_optimization` or `weight_map`;
   * `""` for the top-level object. At most ~200 characters. */
  path: string;
  /** The repeated key, decoded. */
  key: string;
}

interface Frame {
  /** Keys seen so far (objects), null for arrays. */
  keys: Set<string> | null;
  /** Objects: the next string is a key. */
  expectKey: boolean;
  /** Path segment of this container inside its parent. */
  seg: string;
  /** Arrays: index of the current element. */
  index: number;
  /** Objects: the last key read (names the child container's segment). */
  lastKey: string;
}

const MAX_PATH = 200;

function segment(parent: Frame | undefined): string {
  if (parent === undefined) return "";
  if (parent.keys === null) return `[${parent.index}]`;
  const k = parent.lastKey;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `.${k}` : `[${quoteUntrusted(k)}]`;
}

function pathOf(stack: readonly Frame[]): string {
  let p = "";
  for (const f of stack) {
    p += f.seg;
    if (p.length > MAX_PATH) return `${p.slice(0, MAX_PATH)}…`;
  }
  return p.startsWith(".") ? p.slice(1) : p;
}

/**
 * Find the first object key that occurs twice in the same object of `text` (module comment).
 * @param text JSON text that `JSON.parse` accepts.
 * @returns the first duplicate, or null when every object's keys are distinct.
 */
export function findDuplicateJsonKey(text: string): DuplicateJsonKey | null {
  const stack: Frame[] = [];
  const len = text.length;
  let i = 0;
  while (i < len) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      i++;
      while (i < len) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i += 2;
        else if (d === 0x22) break;
        else i++;
      }
      const top = stack[stack.length - 1];
      if (top !== undefined && top.keys !== null && top.expectKey) {
        let key: string;
        try {
          key = JSON.parse(text.slice(start, i + 1)) as string;
        } catch {
          return null; // not valid JSON: JSON.parse reports it
        }
        if (top.keys.has(key)) return { path: pathOf(stack), key };
        top.keys.add(key);
        top.lastKey = key;
        top.expectKey = false;
      }
      i++;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = stack[stack.length - 1];
      stack.push({ keys: c === 0x7b ? new Set() : null, expectKey: c === 0x7b, seg: segment(parent), index: 0, lastKey: "" });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top !== undefined) {
        if (top.keys !== null) top.expectKey = true;
        else top.index++;
      }
    }
    i++;
  }
  return null;
}
