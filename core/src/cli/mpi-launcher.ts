/**
 * `bun run train --launcher mpi --world-size N [--hostfile hosts] …`: validate the job here, then
 * run `mpirun -np N … bun core/src/cli/train.ts <the same options>` (launch/mpi-launch.ts builds
 * the mpirun line), passing its output through and returning its exit status. Inside mpirun every
 * process is one rank (cli/train.ts sees Open MPI's environment and trains on the `mpi`
 * transport). Also the rank-side error report used under mpirun.
 */
import { existsSync, writeSync } from "node:fs";
import { constants as osConstants, hostname } from "node:os";
import { fileURLToPath } from "node:url";
import { resolve } from "node:path";
import { CommAbortedError } from "../comm/errors.ts";
import { MPI_INSTALL_HINT, mpiLoadError, tryLoadMpi } from "../comm/mpi/ffi.ts";
import { LaunchError } from "../launch/launch.ts";
import { findMpirun, mpirunCommand } from "../launch/mpi-launch.ts";
import { LAUNCHER_HOST_ENV, LAUNCHER_PID_ENV } from "../launch/parent-watch.ts";
import { loadTrainJob, UsageError, type TrainArgs } from "./args.ts";
import { spawn } from "@zeromoe/kernels/runtime";

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
 * when it died of signal n). SIGINT/SIGTERM received meanwhile are passed to mpirun (which ends
 * the ranks); the status is then 128 + that signal, with a `stopped` line, once mpirun is gone. @throws UsageError (exit 2) when Open MPI is missing — saying what to
 * install — or the hostfile does not exist; ConfigError for a bad job (checked before mpirun).
 */
export async function trainUnderMpirun(a: TrainArgs, argv: readonly string[]): Promise<number> {
  if (findMpirun() === null) throw new UsageError(`--launcher mpi: mpirun not found on PATH; ${MPI_INSTALL_HINT}`, "");
  if (tryLoadMpi() === null) throw new UsageError(`--launcher mpi: ${mpiLoadError()}`, "");
  if (a.hostfile !== undefined && !existsSync(a.hostfile)) throw new UsageError(`--hostfile: file not found: ${resolve(a.hostfile)}`, "");
  const { config } = await loadTrainJob(a);
  const cmd = [
    ...mpirunCommand({ worldSize: config.world_size, hostfile: a.hostfile, forwardEnv: [LAUNCHER_PID_ENV, LAUNCHER_HOST_ENV] }),
    process.execPath,
    fileURLToPath(new URL("./train.ts", import.meta.url)),
    ...stripLauncherOptions(argv),
  ];
  // the ranks on this host watch this process: if it is killed (SIGKILL), they exit and mpirun
  // ends the others (launch/parent-watch.ts)
  const env = { ...process.env, [LAUNCHER_PID_ENV]: String(process.pid), [LAUNCHER_HOST_ENV]: hostname() };
  const proc = spawn(cmd, { stdio: ["inherit", "inherit", "inherit"], env });
  // SIGINT/SIGTERM go on to mpirun, which ends its ranks; this process waits for it (ended by
  // them itself, it left mpirun and every rank training, orphaned)
  let received: NodeJS.Signals | null = null;
  const forward = (sig: NodeJS.Signals): void => {
    received ??= sig;
    try {
      proc.kill(sig);
    } catch {
      // mpirun already gone
    }
  };
  const handlers = (["SIGINT", "SIGTERM"] as const).map((sig) => {
    const h = (): void => forward(sig);
    process.on(sig, h);
    return [sig, h] as const;
  });
  let code: number;
  try {
    code = await proc.exited;
  } finally {
    for (const [sig, h] of handlers) process.off(sig, h);
  }
  if (received !== null) {
    const status = 128 + osConstants.signals[received];
    process.stdout.write(`stopped    by ${received}: passed to mpirun, which ended the ranks (exit ${status})\n`);
    return status;
  }
  if (proc.signalCode) return 128 + (osConstants.signals[proc.signalCode as NodeJS.Signals] ?? 0);
  return code;
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
