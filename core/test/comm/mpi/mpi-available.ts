/**
 * Whether the mpi transport's tests can run here: Open MPI's mpirun on PATH and its libmpi
 * loadable through bun:ffi. When not, the mpi tests skip with {@link MPI_SKIP_REASON} (CI installs
 * Open MPI, so they run there: scripts/setup.sh with CI=true as root).
 */
import { tryLoadMpi, mpiLoadError } from "../../../src/comm/mpi/ffi.ts";
import { findMpirun } from "../../../src/launch/mpi-launch.ts";

const mpirun = findMpirun();
const lib = mpirun ? tryLoadMpi() : null;

/** True when mpirun and libmpi are both present. */
export const MPI_AVAILABLE: boolean = mpirun !== null && lib !== null;

/** Why the mpi tests are skipped ("" when they run). */
export const MPI_SKIP_REASON: string = MPI_AVAILABLE
  ? ""
  : `Open MPI is absent (${mpirun === null ? "mpirun not on PATH" : mpiLoadError()}): mpi transport tests skipped; install openmpi-bin and libopenmpi-dev (or ZEROMOE_WITH_MPI=1 bash scripts/setup.sh)`;

if (!MPI_AVAILABLE) console.warn(`[skip] ${MPI_SKIP_REASON}`);
