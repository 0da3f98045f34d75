/**
 * Block shapes of the tensor-core matmul (matmul-coop-wgsl.ts): how a workgroup's output block is
 * split among its subgroups, how deep each K step is, and how many workgroup-memory stages the
 * operand tiles use. A tile is named `BMxBNxBK-SGMxSGN-sS` (e.g. `128x256x32-2x4-s1`): a BM×BN
 * block of out per workgroup of SGM·SGN subgroups of 32 invocations laid out SGM (rows) × SGN
 * (columns), each subgroup owning (BM/SGM)×(BN/SGN) = FM×FN fragments of 16×16; K advances BK per
 * step; S = 2 keeps two tiles of A and B in workgroup memory (one barrier per step), S = 1 one (two
 * barriers per step, half the memory). Both stage the next tiles in registers while the current
 * ones are multiplied (the register-prefetch pipeline of CUTLASS's pre-Ampere GEMMs).
 */

/** One block shape (see the file comment). All sizes in elements. */
export interface CoopTile {
  BM: number;
  BN: number;
  BK: number;
  /** Subgroups along M and along N. */
  SGM: number;
  SGN: number;
  /** Workgroup-memory stages of the operand tiles: 1 or 2. */
  stages: 1 | 2;
}

/** Subgroup size the kernel assumes (NVIDIA's warp). */
export const COOP_SUBGROUP = 32;

/** Halves of padding after each staged row: keeps every fragment row 16-byte aligned (the
 * cooperative-matrix load's alignment rule) and spreads rows over the 32 memory banks. */
export const COOP_PAD = 8;

/** Fragment edge (16×16×16 f16→f32, the one configuration naga 30 and the H200 share). */
export const COOP_FRAG = 16;

/** The default block: 128×128×32, 8 subgroups as 2×4 (4×2 fragments each), two stages. */
export const COOP_DEFAULT_TILE: CoopTile = { BM: 128, BN: 128, BK: 32, SGM: 2, SGN: 4, stages: 2 };

/** The name of a tile, `BMxBNxBK-SGMxSGN-sS`. */
export function coopTileName(t: CoopTile): string {
  return `${t.BM}x${t.BN}x${t.BK}-${t.SGM}x${t.SGN}-s${t.stages}`;
}

/** Invocations per workgroup of a tile. */
export function coopTileThreads(t: CoopTile): number {
  return t.SGM * t.SGN * COOP_SUBGROUP;
}

/** Fragments per subgroup along M and N. */
export function coopTileFragments(t: CoopTile): { FM: number; FN: number } {
  return { FM: t.BM / t.SGM / COOP_FRAG, FN: t.BN / t.SGN / COOP_FRAG };
}

/**
 * Parse a tile name (`BMxBNxBK-SGMxSGN-sS`) and check it with {@link coopTileProblem}.
 * @throws Error naming the text and what was expected.
 */
export function parseCoopTile(name: string): CoopTile {
  const m = /^(\d+)x(\d+)x(\d+)-(\d+)x(\d+)-s([12])$/.exec(name.trim());
  if (!m) throw new Error(`coop tile '${name}': expected BMxBNxBK-SGMxSGN-sS, e.g. 128x256x32-2x4-s1`);
  const t: CoopTile = { BM: +m[1]!, BN: +m[2]!, BK: +m[3]!, SGM: +m[4]!, SGN: +m[5]!, stages: +m[6]! as 1 | 2 };
  const p = coopTileProblem(t);
  if (p) throw new Error(`coop tile '${name}': ${p}`);
  return t;
}

/**
 * Why a tile cannot be generated, or "" when it can: fragments per subgroup must be whole
 * (BM divisible by 16·SGM, BN by 16·SGN), BK a multiple of 16, 1–16 subgroups, at most 64
 * fragments per subgroup, and every staged tile (rows × BK or BK × columns) must split evenly into
 * vec4 loads over the workgroup's invocations.
 */
export function coopTileProblem(t: CoopTile): string {
  const ints = [t.BM, t.BN, t.BK, t.SGM, t.SGN];
  if (!ints.every((v) => Number.isInteger(v) && v > 0)) return "sizes must be positive integers";
  if (t.stages !== 1 && t.stages !== 2) return "stages must be 1 or 2";
  if (t.BM % (COOP_FRAG * t.SGM) !== 0 || t.BN % (COOP_FRAG * t.SGN) !== 0) return `BM must be a multiple of 16·SGM and BN of 16·SGN`;
  if (t.BK % COOP_FRAG !== 0) return "BK must be a multiple of 16";
  const sgs = t.SGM * t.SGN;
  if (sgs > 16) return "at most 16 subgroups (1024 invocations)";
  const { FM, FN } = coopTileFragments(t);
  if (FM * FN > 64) return "at most 64 accumulator fragments per subgroup";
  const wg = coopTileThreads(t);
  for (const n of [t.BM * t.BK, t.BN * t.BK]) if (n % (wg * 4) !== 0) return `a staged tile of ${n} elements does not split into vec4 loads over ${wg} invocations`;
  return "";
}

/** Row length (halves) of a staged tile of A: rows m × BK columns, or BK rows × BM columns when transposed. */
export function coopStageLdA(t: CoopTile, transA: boolean): number {
  return (transA ? t.BM : t.BK) + COOP_PAD;
}

/** Row length (halves) of a staged tile of B: BK rows × BN columns, or BN rows × BK columns when transposed. */
export function coopStageLdB(t: CoopTile, transB: boolean): number {
  return (transB ? t.BK : t.BN) + COOP_PAD;
}

/** Halves of one staged tile of A / B. */
export function coopStageSizes(t: CoopTile, transA: boolean, transB: boolean): { SA: number; SB: number } {
  return {
    SA: (transA ? t.BK : t.BM) * coopStageLdA(t, transA),
    SB: (transB ? t.BN : t.BK) * coopStageLdB(t, transB),
  };
}
