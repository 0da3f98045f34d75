/** Public surface of the launcher (docs/comm.md). */
export { launch, LaunchError, type LaunchOptions, type RankEntry, type RankFailure } from "./launch.ts";
export { findMpirun, launchMpi, launchMpiWithOutput, mpirunCommand, type MpiJobOutput, type MpiLaunchOptions, type MpirunOptions } from "./mpi-launch.ts";
export { runMpiRank, type MpiRankOptions } from "./mpi-rank.ts";
