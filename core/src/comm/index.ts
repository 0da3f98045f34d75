/** Public surface of the communication layer (docs/comm.md). */
export type {
  CollectiveName,
  CollectiveOptions,
  CommArray,
  CommReduceOp,
  Communicator,
  Group,
  OpStats,
  ReduceOptions,
} from "./communicator.ts";
export { COLLECTIVE_NAMES } from "./communicator.ts";
export { CommAbortedError, CommMismatchError, CommPeerFinishedError, CommTimeoutError } from "./errors.ts";
export {
  createParallelGroups,
  expertTensorParallelRanks,
  expertDataParallelGroups,
  expertDataParallelRanks,
  expertParallelGroups,
  expertParallelRanks,
  type ParallelGroups,
} from "./groups.ts";
export { LocalCommunicator, type LocalCommOptions } from "./local/local-communicator.ts";
export { timeoutMsFromEnv, type TransportOptions } from "./transport-options.ts";
export { abortWorld, createLocalWorldMemory, DEFAULT_SLOT_BYTES, type LocalWorldMemory } from "./local/memory.ts";
export { ringAllReduceBytes, ringShardBytes } from "./stats.ts";
export { createSoloCommunicator } from "./solo.ts";
export { allToAllVRows, type RowExchange } from "./all-to-all-v-rows.ts";
export { MpiCommunicator, mpiEnvironment, mpiLoadError, MPI_INSTALL_HINT, tryLoadMpi, type MpiCommOptions, type MpiEnvironment } from "./mpi/index.ts";
