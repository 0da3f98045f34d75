/**
 * `bun run train --launcher mpi --world-size N [--hostfile hosts] …`: validate the job here, then
 * run `mpirun -np N … bun core/src/cli/train.ts <the same options>` (launch/mpi-launch.ts builds
 * the mpirun line), passing its output through and returning its exit status. Inside mpirun every
 * process is one rank (cli/train.ts sees Open MPI's environment and trains on the `mpi`
 * transport). Also the rank-side error report used under mpirun.
 */
import { existsSync, writeSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { resolve } from "node:path";
import { CommAbortedError } from "../comm/errors.ts";
import { MPI_INSTALL_HINT, mpiLoadError, tryLoadMpi } from "../comm/mpi/ffi.ts";
import { LaunchError } from "../launch/launch.ts";
import { findMpirun, mpirunCommand } from "../launch/mpi-launch.ts";
import { loadTrainJob, UsageError, type TrainArgs } from "./args.ts";

/** `argv` without `--launcher X` / `--launcher=X` and `--hostfile X` / `--hostfile=X`. */
export function stripLauncherOptions(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--launcher" || a === "--hostfile") i++;
    else if (!a.startsWith("--launcher=") && !a.startsWith("--hostfile=")) out.push(a);
  }
  return out;
}

/**
 * Run the job of `a` under mpirun (see the file comment) and return mpirun's exit status (128 + n
 * when it died of signal n). @throws UsageError (exit 2) when Open MPI is missing — saying what to
 * install — or the hostfile does not exist; ConfigError for a bad job (checked before mpirun).
 */
export async function trainUnderMpirun(a: TrainArgs, argv: readonly string[]): Promise<number> {
  if (findMpirun() === null) throw new UsageError(`--launcher mpi: mpirun not found on PATH; ${MPI_INSTALL_HINT}`, "");
  if (tryLoadMpi() === null) throw new UsageError(`--launcher mpi: ${mpiLoadError()}`, "");
  if (a.hostfile !== undefined && !existsSync(a.hostfile)) throw new UsageError(`--hostfile: file not found: ${resolve(a.hostfile)}`, "");
  const { config } = await loadTrainJob(a);
  const cmd = [
    ...mpirunCommand({ worldSize: config.world_size, hostfile: a.hostfile }),
    process.execPath,
    fileURLToPath(new URL("./train.ts", import.meta.url)),
    ...stripLauncherOptions(argv),
  ];
  const proc = Bun.spawn(cmd, { stdio: ["inherit", "inherit", "inherit"] });
  const code = await proc.exited;
  return proc.signalCode ? 128 + (typeof proc.signalCode === "number" ? proc.signalCode : 15) : code;
}

/**
 * The error report of a rank under mpirun, before MPI_Abort: the same message `describe` gives for
 * a failed `local` job, always naming the rank, written synchronously to stderr (the abort ends
 * the process at once). Returns the exit status for MPI_Abort (mpirun exits with it).
 */
export function reportMpiRankError(e: Error, rank: number, describe: (e: unknown) => { message: string; status: number }): number {
  const le = new LaunchError(rank, [{ rank, message: `${e.name}: ${e.message}`, stack: e.stack, aborted: e instanceof CommAbortedError }]);
  const { message, status } = describe(le);
  const named = message.includes(`rank ${rank}`) ? message : message.replace(/^error: /, `error: rank ${rank}: `);
  try {
    writeSync(2, named + "\n");
  } catch {
    // stderr closed: the exit status still says it failed
  }
  return status;
}
