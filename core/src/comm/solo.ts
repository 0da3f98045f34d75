/**
 * A world of one rank on the current thread, for single-process runs and tests: the same
 * {@link LocalCommunicator} a launched job gets, on its own small shared memory. Collectives on it
 * copy/return their inputs (a reduction over one member is the identity, up to `average`).
 */

import type { Communicator } from "./communicator.ts";
import { LocalCommunicator, type LocalCommOptions } from "./local/local-communicator.ts";
import { createLocalWorldMemory } from "./local/memory.ts";

/** Create a world_size-1 communicator (rank 0) on the calling thread. `slotBytes` defaults to 1 MiB. */
export function createSoloCommunicator(opts: LocalCommOptions & { slotBytes?: number } = {}): Communicator {
  return new LocalCommunicator(createLocalWorldMemory(1, opts.slotBytes ?? 1 << 20), 0, opts);
}
