/** The `mpi` transport (docs/comm.md "The mpi transport"): Open MPI through bun:ffi. */
export { MpiCommunicator, type MpiCommOptions } from "./mpi-communicator.ts";
export { mpiLoadError, MPI_INSTALL_HINT, tryLoadMpi } from "./ffi.ts";
export { mpiEnvironment, type MpiEnvironment } from "./environment.ts";
