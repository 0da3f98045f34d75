/**
 * Standard process-group layouts for data, expert and expert-data parallelism (docs/domain.md §4;
 * the layout DeepSpeed's MoE uses with `ep_size` consecutive ranks per expert-parallel group).
 *
 * With world_size W and ep_size E (W % E == 0):
 * - dp group: all W ranks (dense parameters are data parallel over the whole world).
 * - ep groups: W/E consecutive blocks of E ranks: `[0..E−1], [E..2E−1], …`. An ep group holds one
 *   full set of experts; tokens travel by all_to_all_v inside it.
 * - edp groups: E groups of W/E ranks with the same index within their ep group:
 *   edp group j = `{j, j+E, j+2E, …}`. Its members hold the same experts; expert gradients are
 *   averaged over it.
 * Example W=4, E=2: ep = [0,1], [2,3]; edp = [0,2], [1,3]; dp = [0,1,2,3].
 * With expert tensor parallelism (etp_size T > 1) the ep and edp groups are strided by T and an
 * etp group of T consecutive ranks is added ({@link expertTensorParallelRanks}); T = 1 gives the
 * groups above and one-rank etp groups.
 */

import type { Communicator, Group } from "./communicator.ts";

function checkLayout(worldSize: number, epSize: number): void {
  if (!Number.isInteger(worldSize) || worldSize < 1) throw new Error(`groups: world_size must be a positive integer, got ${worldSize}`);
  if (!Number.isInteger(epSize) || epSize < 1) throw new Error(`groups: ep_size must be a positive integer, got ${epSize}`);
  if (worldSize % epSize !== 0) throw new Error(`groups: world_size (${worldSize}) must be divisible by ep_size (${epSize})`);
}

/** All ep groups (lists of world ranks) for world_size/ep_size: consecutive blocks of ep_size.
 * Throws when world_size % ep_size ≠ 0 or either is not a positive integer. */
export function expertParallelGroups(worldSize: number, epSize: number): number[][] {
  checkLayout(worldSize, epSize);
  const out: number[][] = [];
  for (let b = 0; b < worldSize / epSize; b++) out.push(Array.from({ length: epSize }, (_, i) => b * epSize + i));
  return out;
}

/** All edp groups: group j holds the ranks whose index within their ep group is j, ascending.
 * Throws like {@link expertParallelGroups}. */
export function expertDataParallelGroups(worldSize: number, epSize: number): number[][] {
  checkLayout(worldSize, epSize);
  const out: number[][] = [];
  for (let j = 0; j < epSize; j++) out.push(Array.from({ length: worldSize / epSize }, (_, b) => b * epSize + j));
  return out;
}

/** The ranks of `rank`'s ep group. */
export function expertParallelRanks(rank: number, worldSize: number, epSize: number): number[] {
  checkLayout(worldSize, epSize);
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new Error(`groups: rank ${rank} out of range [0, ${worldSize})`);
  const start = Math.floor(rank / epSize) * epSize;
  return Array.from({ length: epSize }, (_, i) => start + i);
}

/** The ranks of `rank`'s edp group. */
export function expertDataParallelRanks(rank: number, worldSize: number, epSize: number): number[] {
  checkLayout(worldSize, epSize);
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new Error(`groups: rank ${rank} out of range [0, ${worldSize})`);
  const j = rank % epSize;
  return Array.from({ length: worldSize / epSize }, (_, b) => b * epSize + j);
}

/**
 * The etp, ep and edp groups of `rank` with expert tensor parallelism (etp_size T; docs/moe.md
 * "Expert tensor parallelism"): etp innermost, then ep, then edp — a block of E·T consecutive ranks
 * holds one replica of the experts; etp = T consecutive ranks (the slices of the same experts),
 * ep = the E ranks of the block with the same etp index (stride T), edp = the ranks at the same
 * position of every block (stride E·T). With T = 1 these are the groups of the file comment.
 * @throws when world_size % (ep_size·etp_size) ≠ 0, a size is not a positive integer, or rank ∉ [0, W).
 */
export function expertTensorParallelRanks(rank: number, worldSize: number, epSize: number, etpSize: number): { etp: number[]; ep: number[]; edp: number[] } {
  if (!Number.isInteger(etpSize) || etpSize < 1) throw new Error(`groups: etp_size must be a positive integer, got ${etpSize}`);
  checkLayout(worldSize, epSize);
  if (worldSize % (epSize * etpSize) !== 0) throw new Error(`groups: world_size (${worldSize}) must be divisible by ep_size × etp_size (${epSize} × ${etpSize})`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new Error(`groups: rank ${rank} out of range [0, ${worldSize})`);
  const T = etpSize;
  const B = epSize * T;
  const block = Math.floor(rank / B) * B;
  const etpStart = Math.floor(rank / T) * T;
  return {
    etp: Array.from({ length: T }, (_, i) => etpStart + i),
    ep: Array.from({ length: epSize }, (_, i) => block + i * T + (rank % T)),
    edp: Array.from({ length: worldSize / B }, (_, b) => b * B + (rank % B)),
  };
}

/** The groups of this rank for a given ep_size (and etp_size). */
export interface ParallelGroups {
  /** All ranks (dense data parallelism). */
  dp: Group;
  /** This rank's expert-parallel group. */
  ep: Group;
  /** This rank's expert-data-parallel group. */
  edp: Group;
  /** This rank's expert-tensor-parallel group (one rank when etp_size is 1). */
  etp: Group;
}

/** Create this rank's dp, ep, edp and etp groups on `comm` for `epSize` and `etpSize` (layout in
 * the file comment and {@link expertTensorParallelRanks}). Not a collective.
 * Throws when worldSize % (epSize·etpSize) ≠ 0. */
export function createParallelGroups(comm: Communicator, epSize: number, etpSize = 1): ParallelGroups {
  const g = expertTensorParallelRanks(comm.rank, comm.worldSize, epSize, etpSize);
  return {
    dp: comm.world,
    ep: comm.newGroup(g.ep, `ep[${g.ep.join(",")}]`),
    edp: comm.newGroup(g.edp, `edp[${g.edp.join(",")}]`),
    etp: comm.newGroup(g.etp, `etp[${g.etp.join(",")}]`),
  };
}
