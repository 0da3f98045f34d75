/**
 * Training in a process started by Open MPI's `mpirun` (`mpirun -np 4 bun run train …`, or
 * `bun run train --launcher mpi`): this process is one rank on the `mpi` transport
 * (core/src/comm/mpi/). It runs rank.ts like `runTraining` does through `launch`, and rank 0
 * receives every rank's report for the summary (core/src/launch/mpi-rank.ts).
 *
 * Differences from `runTraining` (train/run.ts): only rank 0 holds the checkpoint directory's
 * lock (ranks may be on several hosts sharing the directory); each process checks its own host's
 * memory; SIGINT/SIGTERM handlers are installed in every rank (stop-signal.ts: the ranks agree on
 * the step to stop after through an all_reduce), though mpirun itself may end the ranks first.
 */
import { acquireCheckpointLock } from "../checkpoint/dir-lock.ts";
import type { JobConfig } from "../config/types.ts";
import { runMpiRank } from "../launch/mpi-rank.ts";
import { loadJobPlugins } from "./job-plugins.ts";
import { checkModelStateFits, cpuMemoryLimits, readHostAvailableMemory } from "./memory-check.ts";
import type { TrainRankArgs } from "./rank.ts";
import type { RunTrainingOptions, TrainingRun } from "./run.ts";
import { createStopFlag, installStopHandlers } from "./stop-signal.ts";
import { buildSummary, type RankReport } from "./summary.ts";

/**
 * Train this process's rank of `config` under mpirun. Resolves at rank 0 with the whole run's
 * summary and reports, elsewhere with null. When this rank fails, `onError` reports it and returns
 * the exit status, and the job is aborted (MPI_Abort; mpirun ends every rank) — the promise never
 * settles then. Throws before MPI starts for a model that cannot fit this host (MemoryBudgetError)
 * and, at rank 0, a held checkpoint lock (CheckpointLockError).
 */
export async function runTrainingMpiRank(
  config: JobConfig,
  rank: number,
  o: RunTrainingOptions & { onError: (e: Error, rank: number) => number },
): Promise<TrainingRun | null> {
  const hostMemory = readHostAvailableMemory();
  // the job's plugins' memory contributions (ZeRO stage, MoE, third party) shape the estimate
  if (config.backend === "cpu") checkModelStateFits(config, cpuMemoryLimits(hostMemory), (await loadJobPlugins(config, o.baseDir)).memory);
  const verbose = o.verbose ?? true;
  const lock = rank !== 0 || config.checkpoint.dir === null ? null : acquireCheckpointLock(config.checkpoint.dir, (m) => { if (verbose) console.log(`warning: ${m}`); });
  const stop = createStopFlag();
  const args: TrainRankArgs = {
    hostMemory,
    config,
    verbose,
    tty: false,
    baseDir: o.baseDir ?? process.cwd(),
    resume: o.resume,
    initFrom: o.initFrom,
    dumpBatches: o.dumpBatches,
    saveInit: o.saveInit,
    stop,
  };
  let uninstall = () => {};
  try {
    uninstall = installStopHandlers(stop);
    const reports = await runMpiRank<RankReport, TrainRankArgs>({ entry: new URL("./rank.ts", import.meta.url), args, timeoutS: o.timeoutS, onError: o.onError });
    return reports ? { summary: buildSummary(reports), reports } : null;
  } finally {
    uninstall();
    lock?.release();
  }
}
