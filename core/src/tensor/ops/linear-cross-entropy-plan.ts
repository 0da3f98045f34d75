/**
 * Chunk and tile sizes of the fused LM head + loss ({@link linearCrossEntropy} in
 * linear-cross-entropy.ts): how many tokens (rows of the hidden states) and how many vocabulary
 * entries (rows of the head weight) one tile of logits covers. The tile is the only logits-shaped
 * buffer the op allocates, so its size bounds the op's transient memory; it must also fit one
 * storage binding of the device.
 */
import type { Backend } from "@zeromoe/kernels";

/** Default byte budget of one logits tile (f32): 128 MiB. At T = 8192 tokens this is a tile of
 * 8192 × 4096 logits, whose products (8192 × 4096 × H) are large enough for the matmul kernels to
 * run at full rate, while the op's transient memory stays far below the 4.2 GB of whole logits at
 * vocab 128256. */
export const DEFAULT_TILE_BYTES = 128 * 2 ** 20;

/** Narrowest vocabulary tile the default plan aims for before it splits the tokens into chunks. */
const MIN_TILE_VOCAB = 4096;

/** Chunk and tile sizes are rounded down to a multiple of this when they do not cover their whole
 * dimension (a multiple of every matmul tile edge). */
const ALIGN = 128;

/** Overrides of the plan; every field optional. */
export interface TilePlanOptions {
  /** Tokens per chunk (rows of hidden per tile), ≥ 1. Default: all tokens when a tile of
   * min(vocab, 4096) columns fits the budget, else as many as fit. */
  chunkTokens?: number;
  /** Vocabulary entries per tile, ≥ 1. Default: as many as fit the budget at `chunkTokens` rows. */
  tileVocab?: number;
  /** Byte budget of one f32 logits tile; default {@link DEFAULT_TILE_BYTES}, capped by the
   * device's largest binding. */
  tileBytes?: number;
}

/** A chosen plan: `chunkTokens × tileVocab` logits per tile. */
export interface TilePlan {
  chunkTokens: number;
  tileVocab: number;
}

/** The largest buffer a kernel can bind whole, in bytes: a webgpu backend's segment size
 * (`segmentElems` 4-byte elements: min(maxBufferSize, maxStorageBufferBindingSize) of its device,
 * or lower with its `maxBindingBytes` option; a longer buffer is held in segments,
 * kernels/src/webgpu/buffers.ts), else those device limits; Infinity on the cpu backend. */
export function bindingLimitBytes(be: Backend): number {
  const w = be as { segmentElems?: number; device?: { limits?: { maxBufferSize?: number; maxStorageBufferBindingSize?: number } } };
  const lim = w.device?.limits;
  const device = Math.min(lim?.maxBufferSize ?? Infinity, lim?.maxStorageBufferBindingSize ?? Infinity);
  return typeof w.segmentElems === "number" && w.segmentElems > 0 ? Math.min(device, 4 * w.segmentElems) : device;
}

function positiveInt(v: number | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || v < 1) throw new Error(`linearCrossEntropy: options.${name} must be a positive integer, got ${v}`);
  return v;
}

function alignDown(n: number, whole: number): number {
  if (n >= whole) return whole;
  return n >= ALIGN ? Math.floor(n / ALIGN) * ALIGN : Math.max(1, n);
}

/**
 * Plan the tiles for `tokens` rows of hidden states against a `vocab`-row head weight on `be`.
 * Budget B = min(tileBytes, the device's largest binding) / 4 elements; chunkTokens =
 * min(tokens, B / min(vocab, 4096)) and tileVocab = min(vocab, B / chunkTokens), each rounded
 * down to a multiple of 128 when it does not cover its whole dimension; explicit options win.
 * @throws when an option is not a positive integer, or the tile exceeds the device's largest
 * binding (naming both sizes).
 */
export function planTiles(be: Backend, tokens: number, vocab: number, opts: TilePlanOptions = {}): TilePlan {
  const limit = bindingLimitBytes(be);
  const tileBytes = opts.tileBytes ?? DEFAULT_TILE_BYTES;
  if (!(tileBytes >= 4) || !Number.isFinite(tileBytes)) throw new Error(`linearCrossEntropy: options.tileBytes must be a finite number ≥ 4, got ${tileBytes}`);
  const budget = Math.max(1, Math.floor(Math.min(tileBytes, limit) / 4));
  const T = Math.max(tokens, 1);
  const V = Math.max(vocab, 1);
  const chunkTokens = positiveInt(opts.chunkTokens, "chunkTokens") ?? alignDown(Math.max(1, Math.floor(budget / Math.min(V, MIN_TILE_VOCAB))), T);
  const tileVocab = positiveInt(opts.tileVocab, "tileVocab") ?? alignDown(Math.max(1, Math.floor(budget / Math.min(chunkTokens, T))), V);
  const bytes = 4 * Math.min(chunkTokens, T) * Math.min(tileVocab, V);
  if (bytes > limit) throw new Error(`linearCrossEntropy: a tile of ${Math.min(chunkTokens, T)} tokens × ${Math.min(tileVocab, V)} vocabulary entries is ${bytes} bytes, above the device's largest binding of ${limit} bytes; lower options.chunkTokens or options.tileVocab`);
  return { chunkTokens: Math.min(chunkTokens, T), tileVocab: Math.min(tileVocab, V) };
}
