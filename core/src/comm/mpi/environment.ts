/**
 * What Open MPI's launcher tells a process about its place in the job, read from the environment
 * `mpirun` sets for every rank (Open MPI docs, "mpirun(1): Environment variables"):
 * OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * OMPI_COMM_WORLD_LOCAL_SIZE.
 */

/** A process's rank and world size as mpirun set them. */
export interface MpiEnvironment {
  worldSize: number;
  rank: number;
  /** Index of this process among the job's processes on this host (picks the GPU). */
  localRank: number;
  localSize: number;
}

/** The rank/world of this process when started by Open MPI's mpirun, else null. Throws when the
 * variables are present but malformed. */
export function mpiEnvironment(env: NodeJS.ProcessEnv = process.env): MpiEnvironment | null {
  const size = env.OMPI_COMM_WORLD_SIZE;
  if (size === undefined || size === "") return null;
  const num = (name: string, dflt?: number): number => {
    const v = env[name];
    if ((v === undefined || v === "") && dflt !== undefined) return dflt;
    const x = Number(v);
    if (!Number.isInteger(x) || x < 0) throw new Error(`mpi: environment variable ${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
    return x;
  };
  const worldSize = num("OMPI_COMM_WORLD_SIZE");
  const rank = num("OMPI_COMM_WORLD_RANK");
  return { worldSize, rank, localRank: num("OMPI_COMM_WORLD_LOCAL_RANK", rank), localSize: num("OMPI_COMM_WORLD_LOCAL_SIZE", worldSize) };
}
