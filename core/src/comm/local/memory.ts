/**
 * Shared memory of a `local` job: one control block (Int32 words, used with Atomics) and one data
 * arena with a fixed-size slot per rank. Created once by the launcher and handed to every rank
 * (Bun Worker); nothing is allocated per collective. Layout of the control block:
 *
 * ```
 * [0]                      ABORT: 0, or (world rank that failed first) + 1, or −1 (aborted, no rank)
 * [8 + 8r .. 8 + 8r + 6]   header of rank r's current collective (op code, dtype code, length, root…)
 * [8 + 8r + 7]             FINISHED flag of rank r: 1 once its entry function has returned
 * [REG + e·ENTRY ..]       group registry entry e: [state, bell, member mask words…, arrive[W]…]
 * ```
 * A registry entry's `state` is 0 free, 1 being claimed, 2 ready; `bell` is the word members
 * increment and notify on barrier arrival and wait on; `arrive[r]` is the last barrier epoch
 * world rank r reached in that group.
 */

/** Largest default bytes per rank slot of the data arena (env ZEROMOE_COMM_ARENA_MB overrides). */
export const DEFAULT_SLOT_BYTES = 16 << 20;
/** Default arena of a whole job: slots shrink below {@link DEFAULT_SLOT_BYTES} past 16 ranks. */
const DEFAULT_ARENA_BYTES = 256 << 20;
/** Smallest default slot. */
const MIN_DEFAULT_SLOT_BYTES = 1 << 20;
/** Most distinct groups (rank sets) one job can create. */
export const MAX_GROUPS = 256;
/** Index of the abort word. */
export const ABORT = 0;
/** Word index of rank 0's call header. */
export const HEADER_BASE = 8;
/** Words per rank header (call fields, then the FINISHED flag). */
export const HEADER_WORDS = 8;
/** Offset of the FINISHED flag within a rank's header. */
export const FINISHED_WORD = 7;

/** Memory shared by all ranks of a `local` job. Structured-cloneable (goes to Workers as is). */
export interface LocalWorldMemory {
  worldSize: number;
  /** Bytes per rank slot in `arena` (a multiple of 8). */
  slotBytes: number;
  control: SharedArrayBuffer;
  arena: SharedArrayBuffer;
}

/** Word offsets derived from the world size. */
export interface ControlLayout {
  registryBase: number;
  maskWords: number;
  entryWords: number;
  totalWords: number;
}

/** The control-block layout for `worldSize` ranks. */
export function controlLayout(worldSize: number): ControlLayout {
  const maskWords = Math.ceil(worldSize / 32);
  const registryBase = HEADER_BASE + HEADER_WORDS * worldSize;
  const entryWords = 2 + maskWords + worldSize;
  return { registryBase, maskWords, entryWords, totalWords: registryBase + MAX_GROUPS * entryWords };
}

/** Slot size from the environment (ZEROMOE_COMM_ARENA_MB, MiB per rank) or the default for
 * `worldSize` ranks: 16 MiB up to 16 ranks, then 256 MiB / worldSize, at least 1 MiB.
 * @param env the environment to read (default `process.env`).
 * @throws when the variable is set but not a positive number. */
export function slotBytesFromEnv(worldSize = 1, env: Record<string, string | undefined> = process.env): number {
  const v = env.ZEROMOE_COMM_ARENA_MB;
  if (v === undefined || v === "") {
    const perRank = Math.floor(DEFAULT_ARENA_BYTES / worldSize / 8) * 8;
    return Math.max(MIN_DEFAULT_SLOT_BYTES, Math.min(DEFAULT_SLOT_BYTES, perRank));
  }
  const mb = Number(v);
  if (!Number.isFinite(mb) || mb <= 0) throw new Error(`ZEROMOE_COMM_ARENA_MB must be a positive number of MiB, got "${v}"`);
  return Math.max(64, Math.floor((mb * 1048576) / 8) * 8);
}

/**
 * Allocate the shared memory of a job: `worldSize` ranks, `slotBytes` bytes of arena per rank
 * (rounded down to a multiple of 8, at least 64). Throws on invalid sizes.
 */
export function createLocalWorldMemory(worldSize: number, slotBytes: number = slotBytesFromEnv(worldSize)): LocalWorldMemory {
  if (!Number.isInteger(worldSize) || worldSize < 1) throw new Error(`local comm: worldSize must be a positive integer, got ${worldSize}`);
  if (!(slotBytes >= 64)) throw new Error(`local comm: slotBytes must be at least 64, got ${slotBytes}`);
  const slot = Math.floor(slotBytes / 8) * 8;
  if (slot < 16 * worldSize) throw new Error(`local comm: slotBytes (${slotBytes}) must be at least 16·worldSize = ${16 * worldSize} (all_to_all_v exchanges counts through it)`);
  const layout = controlLayout(worldSize);
  return {
    worldSize,
    slotBytes: slot,
    control: new SharedArrayBuffer(layout.totalWords * 4),
    arena: new SharedArrayBuffer(slot * worldSize),
  };
}

/** Wake every rank waiting at a barrier (they re-check their conditions). */
function ringAllBells(mem: LocalWorldMemory, ctl: Int32Array): void {
  const layout = controlLayout(mem.worldSize);
  for (let e = 0; e < MAX_GROUPS; e++) {
    const base = layout.registryBase + e * layout.entryWords;
    if (Atomics.load(ctl, base) === 0) break; // entries are claimed in order
    Atomics.add(ctl, base + 1, 1);
    Atomics.notify(ctl, base + 1);
  }
}

/** Record that world rank `rank` has returned from its entry function, so peers still waiting for
 * it in a collective fail at once instead of at the timeout. */
export function markFinished(mem: LocalWorldMemory, rank: number): void {
  const ctl = new Int32Array(mem.control);
  Atomics.store(ctl, HEADER_BASE + HEADER_WORDS * rank + FINISHED_WORD, 1);
  ringAllBells(mem, ctl);
}

/**
 * Mark the job aborted (first caller wins; `failedRank` −1 for "no rank") and wake every rank
 * waiting in a collective. Safe to call from any thread holding the memory, any number of times.
 * Returns the abort word's value after the call.
 */
export function abortWorld(mem: LocalWorldMemory, failedRank: number): number {
  const ctl = new Int32Array(mem.control);
  const code = failedRank >= 0 ? failedRank + 1 : -1;
  Atomics.compareExchange(ctl, ABORT, 0, code);
  ringAllBells(mem, ctl);
  return Atomics.load(ctl, ABORT);
}
