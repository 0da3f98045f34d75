/**
 * Packed sequences: several examples share one row of a [batch, seq] micro-batch, each a segment
 * (a maximal run of equal per-token segment ids in its row). Within a segment RoPE positions start
 * at 0 and attention reads only the segment's own earlier tokens, so a packed row computes, per
 * example, exactly what the example alone in a row would (the "position ids restart, attention
 * confined to the document" packing of Transformers' DataCollatorWithFlattening, Kundu et al. 2024
 * "Enhancing Training Efficiency Using Packing with Flash Attention").
 *
 * How the ops honour it: `rope` and `causalAttention` (attention.ts) run the backend's kernels once
 * per segment on the segment's rows, which are contiguous in the [B, S, heads, D] layout (a view at
 * an offset with B = 1, S = the segment's length), so the same kernels on every backend compute a
 * segment without any mask and nothing outside it is read. Cost: one launch per segment and
 * kernel instead of one per op (see docs/fine-tuning.md "Packing").
 *
 * The segments of the forward being run are ambient, like `noGrad`: a model sets them with
 * {@link withSegments} around its layers (and around a checkpointed layer's recomputation), and
 * the two ops read {@link activeSegments}; an op whose tensor is not [batch, seq, …] of the active
 * segments throws rather than ignore them.
 */

/** One segment: row `row`, positions [start, start + length). */
export interface SegmentRun {
  row: number;
  start: number;
  length: number;
}

/** The segments of a [batch, seq] micro-batch: runs in row-major order, tiling every position. */
export interface SequenceSegments {
  batch: number;
  seq: number;
  runs: readonly SegmentRun[];
}

/**
 * Segments from per-token ids [batch, seq] row-major: a new segment starts at position 0 of each
 * row and wherever the id differs from the previous position's.
 * @throws when `ids` does not have batch·seq entries or an id is not an integer.
 */
export function segmentsFromIds(ids: ArrayLike<number>, batch: number, seq: number): SequenceSegments {
  if (ids.length !== batch * seq) throw new Error(`segmentIds has ${ids.length} entries, expected batch·seq = ${batch * seq}`);
  const runs: SegmentRun[] = [];
  for (let b = 0; b < batch; b++) {
    let start = 0;
    for (let t = 1; t <= seq; t++) {
      const v = ids[b * seq + t - 1]!;
      if (!Number.isInteger(v)) throw new Error(`segmentIds[${b * seq + t - 1}] = ${v} is not an integer`);
      if (t === seq || ids[b * seq + t] !== v) {
        runs.push({ row: b, start, length: t - start });
        start = t;
      }
    }
  }
  return { batch, seq, runs };
}

let active: SequenceSegments | null = null;

/** The segments of the forward being run, or null (one sequence per row). */
export function activeSegments(): SequenceSegments | null {
  return active;
}

/** Runs `fn` with `segments` active (null: none), restoring the previous ones after it settles. */
export async function withSegments<T>(segments: SequenceSegments | null, fn: () => Promise<T>): Promise<T> {
  const prev = active;
  active = segments;
  try {
    return await fn();
  } finally {
    active = prev;
  }
}

/** The active segments when they apply to a [B, S, …] tensor of `op`, null when none are active
 * or there is a single segment per row (the plain path is then exact).
 * @throws when segments are active for another shape. */
export function segmentsFor(op: string, B: number, S: number): SequenceSegments | null {
  const s = active;
  if (s === null) return null;
  if (s.batch !== B || s.seq !== S) throw new Error(`${op}: packed segments are for [${s.batch}, ${s.seq}] but the tensor is [${B}, ${S}, …]`);
  return s.runs.length === B ? null : s;
}
