/**
 * Mutation kit of the decoder fuzz (decoder-fuzz.test.ts): a seeded PRNG, byte-level mutations,
 * and value-level mutations of decoded JSON/CBOR trees (replace a node by a hostile value: huge or
 * negative numbers, BigInt, NaN, long strings, deep nesting, large arrays, wrong types; delete or
 * rename a key). Hostile values that JSON cannot express are spliced into the JSON text through
 * placeholder strings (see {@link SPLICE}).
 */
import { xorshift32 } from "@zeromoe/kernels/testing";

/** xorshift32 in [0, 1). */
export function rng(seed: number): () => number {
  const next = xorshift32(seed);
  return () => next() / 4294967296;
}

/** Integer in [0, n). */
export const pick = (r: () => number, n: number): number => Math.floor(r() * n);

/** One random byte-level mutation of `src` (a new array). */
export function mutateBytes(src: Uint8Array, r: () => number): Uint8Array {
  const n = src.length;
  if (n === 0) return new Uint8Array([pick(r, 256)]);
  const at = pick(r, n);
  const out = new Uint8Array(src);
  switch (pick(r, 7)) {
    case 0: {
      const k = 1 + pick(r, 3);
      for (let i = 0; i < k; i++) out[pick(r, n)]! ^= 1 << pick(r, 8);
      return out;
    }
    case 1:
      out[at] = pick(r, 256);
      return out;
    case 2:
      out.fill([0x00, 0xff, 0x7f, 0x30, 0x39][pick(r, 5)]!, at, Math.min(n, at + 1 + pick(r, 8)));
      return out;
    case 3:
      return src.slice(0, at);
    case 4: {
      const extra = new Uint8Array(1 + pick(r, 64)).map(() => pick(r, 256));
      const o = new Uint8Array(n + extra.length);
      if (pick(r, 2) === 0) {
        o.set(src);
        o.set(extra, n);
      } else {
        o.set(extra);
        o.set(src, extra.length);
      }
      return o;
    }
    case 5: {
      const len = 1 + pick(r, Math.min(64, n - at));
      const o = new Uint8Array(n - len);
      o.set(src.subarray(0, at));
      o.set(src.subarray(at + len), at);
      return o;
    }
    default: {
      const len = 1 + pick(r, Math.min(64, n - at));
      const o = new Uint8Array(n + len);
      o.set(src.subarray(0, at + len));
      o.set(src.subarray(at, n), at + len);
      return o;
    }
  }
}

/** Placeholders a JSON mutation may leave in a tree; {@link spliceJson} replaces them in the text
 * by what JSON.stringify cannot produce (deep nesting, non-finite numbers, huge literals). */
export const SPLICE = {
  deep: "\u0000DEEP\u0000",
  inf: "\u0000INF\u0000",
  bigNumber: "\u0000BIGNUM\u0000",
  longKey: "\u0000LONGKEY\u0000",
} as const;

/** Replace the placeholders in JSON text (quoted, as JSON.stringify writes them). */
export function spliceJson(text: string, r: () => number): string {
  const q = (s: string) => JSON.stringify(s);
  const depth = [40, 1000, 100_000][pick(r, 3)]!;
  return text
    .replaceAll(q(SPLICE.deep), "[".repeat(depth) + "1" + "]".repeat(depth))
    .replaceAll(q(SPLICE.inf), ["1e999", "-1e999", "1e-999", "123456789012345678901234567890"][pick(r, 4)]!)
    .replaceAll(q(SPLICE.bigNumber), "9".repeat(1 + pick(r, 400)))
    .replaceAll(q(SPLICE.longKey), `{${q("k".repeat([300, 5000, 1 << 20][pick(r, 3)]!))}: 1}`);
}

/** Hostile replacement values (`cbor`: BigInt, NaN, byte strings and Maps allowed too). */
function hostile(r: () => number, cbor: boolean, like: unknown): unknown {
  const common: (() => unknown)[] = [
    () => -1,
    () => 0,
    () => 2 ** 31,
    () => 2 ** 53 + 2,
    () => 1e308,
    () => -0.5,
    () => (typeof like === "number" ? like + 1 + pick(r, 3) : 1),
    () => (typeof like === "number" ? like * 1024 : 4096),
    () => "",
    () => "x".repeat(1 + pick(r, 3000)),
    () => null,
    () => true,
    () => [],
    () => ({}),
    () => [like, like],
    () => ({ nested: like }),
    () => new Array(1 + pick(r, 20000)).fill(0),
    () => (typeof like === "string" ? like + "/" + like : "a/b/0"),
  ];
  const json: (() => unknown)[] = [() => SPLICE.deep, () => SPLICE.inf, () => SPLICE.bigNumber, () => SPLICE.longKey];
  const binary: (() => unknown)[] = [
    () => 2n ** BigInt(pick(r, 80)),
    () => -(2n ** 70n),
    () => NaN,
    () => Infinity,
    () => new Uint8Array(pick(r, 64)).map(() => pick(r, 256)),
    () => new Map([["a", 1]]),
    () => {
      let v: unknown = 1;
      for (let i = 0, d = [10, 400][pick(r, 2)]!; i < d; i++) v = [v];
      return v;
    },
    () => (like instanceof Uint8Array ? mutateBytes(like, r) : new Uint8Array(3)),
  ];
  const all = cbor ? [...common, ...binary] : [...common, ...json];
  return all[pick(r, all.length)]!();
}

/** Every (container, key) of a tree, up to `max` of them (containers: plain objects and arrays). */
function slots(root: unknown, max = 5000): [Record<string | number, unknown>, string | number][] {
  const out: [Record<string | number, unknown>, string | number][] = [];
  const stack: unknown[] = [root];
  while (stack.length > 0 && out.length < max) {
    const v = stack.pop();
    if (v === null || typeof v !== "object" || ArrayBuffer.isView(v) || v instanceof Map) continue;
    const o = v as Record<string | number, unknown>;
    const keys = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(o);
    for (const k of keys) {
      out.push([o, k]);
      stack.push(o[k]);
    }
  }
  return out;
}

/**
 * Mutate a decoded tree in place (a deep copy is the caller's business): 1–3 edits, each replacing
 * a node by a hostile value, deleting a key or renaming it.
 */
export function mutateTree(root: unknown, r: () => number, cbor: boolean): void {
  const edits = 1 + pick(r, 3);
  for (let e = 0; e < edits; e++) {
    const s = slots(root);
    if (s.length === 0) return;
    const [o, k] = s[pick(r, s.length)]!;
    const op = pick(r, 10);
    if (op === 0 && !Array.isArray(o)) delete o[k];
    else if (op === 1 && !Array.isArray(o)) {
      o[`${String(k)}_`] = o[k];
      delete o[k];
    } else o[k] = hostile(r, cbor, o[k]);
  }
}

/** Peak resident-set growth tracker (bytes above the baseline at construction). */
export class PeakMemory {
  private readonly base = process.memoryUsage.rss();
  peak = 0;
  sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage.rss() - this.base);
  }
}

/** Cases per reader: env ZEROMOE_FUZZ_CASES (default 10,000); seed: env ZEROMOE_FUZZ_SEED. */
export const FUZZ_CASES = Number(process.env.ZEROMOE_FUZZ_CASES ?? 10_000);
export const FUZZ_SEED = Number(process.env.ZEROMOE_FUZZ_SEED ?? 20261201);
