/**
 * The regrouping both MoE exchanges need after an all_to_all_v: rows arrive from `sources`
 * senders back to back, each sender's block holding its rows of `groups` groups (local experts) in
 * group order; the expert compute wants them group-major — every sender's rows of group 0, then of
 * group 1, …, senders in order within a group. Used by the EP dispatch (exchange.ts) and the etp
 * all_gather (expert-tp.ts).
 */

/** The received layout and its group-major order (see the module comment). */
export interface GroupMajorLayout {
  /** Rows from each sender. */
  sourceRows: number[];
  /** Index (in the received rows) of each group-major row. */
  order: Int32Array;
  /** Rows of each group, summed over the senders. */
  groupRows: number[];
}

/**
 * The layout of rows received as `counts[i·groups + g]` rows of group g from sender i.
 * @returns per-sender totals, the group-major order (a permutation of 0..Σcounts−1) and per-group
 *   totals. O(sources·groups + rows).
 */
export function groupMajorLayout(counts: ArrayLike<number>, sources: number, groups: number): GroupMajorLayout {
  const sourceRows: number[] = [];
  const cursor: number[] = [];
  let tot = 0;
  for (let i = 0; i < sources; i++) {
    let r = 0;
    for (let g = 0; g < groups; g++) r += counts[i * groups + g]!;
    cursor.push(tot);
    sourceRows.push(r);
    tot += r;
  }
  // each sender's block lists its groups in order: a cursor per sender walks it group by group
  const order = new Int32Array(tot);
  const groupRows: number[] = [];
  let q = 0;
  for (let g = 0; g < groups; g++) {
    let n = 0;
    for (let i = 0; i < sources; i++) {
      const c = counts[i * groups + g]!;
      for (let t = 0; t < c; t++) order[q++] = cursor[i]! + t;
      cursor[i]! += c;
      n += c;
    }
    groupRows.push(n);
  }
  return { sourceRows, order, groupRows };
}

/** The inverse of permutation `perm` (inv[perm[i]] = i). */
export function inversePermutation(perm: Int32Array): Int32Array {
  const inv = new Int32Array(perm.length);
  for (let i = 0; i < perm.length; i++) inv[perm[i]!] = i;
  return inv;
}
