/**
 * Splitting a 1-D workgroup count into a dispatch grid.
 *
 * WebGPU caps each dispatch dimension at `maxComputeWorkgroupsPerDimension` (65535 by default,
 * docs/domain.md §6). A kernel that wants `count` workgroups gets a grid [x, y, 1] with x·y ≥ count and
 * recovers its linear workgroup index as `wg.x + wg.y · nwg.x` (WGSL helper `wg_lin` in
 * `wgsl/prelude.ts`); workgroups at or past `count` must return without writing.
 */

/** Grid [x, y, 1] covering `count` workgroups with x, y ≤ `maxPerDim`. Throws when `count` is not a
 * non-negative integer or exceeds maxPerDim². `count` 0 gives [0, 1, 1] (nothing dispatched). */
export function grid2d(count: number, maxPerDim: number): [number, number, number] {
  if (!Number.isInteger(count) || count < 0) throw new Error(`grid2d: workgroup count must be a non-negative integer, got ${count}`);
  if (count <= maxPerDim) return [count, 1, 1];
  const y = Math.ceil(count / maxPerDim);
  if (y > maxPerDim) throw new Error(`grid2d: ${count} workgroups exceed ${maxPerDim}² (maxComputeWorkgroupsPerDimension squared)`);
  const x = Math.ceil(count / y);
  return [x, y, 1];
}
