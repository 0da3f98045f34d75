/**
 * Embedding lookup and its backward on the cpu backend.
 */

import type { FArr } from "./store.ts";

/** out[i, :] = table[ids[i], :] for i < n; ids outside [0, vocab) give a zero row (per the
 * Backend contract, callers validate ids on the host). */
export function embeddingF(table: FArr, to: number, vocab: number, ids: Int32Array, io: number, out: FArr, oo: number, n: number, dim: number): void {
  for (let i = 0; i < n; i++) {
    const id = ids[io + i]!;
    const q = oo + i * dim;
    if (id < 0 || id >= vocab) {
      for (let j = 0; j < dim; j++) out[q + j] = 0;
      continue;
    }
    const p = to + id * dim;
    for (let j = 0; j < dim; j++) out[q + j] = table[p + j]!;
  }
}

/** dtable[ids[i], :] += dout[i, :] for i ascending; ids outside [0, vocab) are skipped. */
export function embeddingBackwardF(dout: FArr, dop: number, ids: Int32Array, io: number, dtable: FArr, dto: number, vocab: number, n: number, dim: number): void {
  for (let i = 0; i < n; i++) {
    const id = ids[io + i]!;
    if (id < 0 || id >= vocab) continue;
    const p = dto + id * dim;
    const q = dop + i * dim;
    for (let j = 0; j < dim; j++) dtable[p + j] = dtable[p + j]! + dout[q + j]!;
  }
}
