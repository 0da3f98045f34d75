/**
 * Start a job on the `mpi` transport from a parent process: `mpirun` runs one process per rank of
 * mpi-rank.ts, which runs the entry module like `launch` does (same `(comm, rank, worldSize,
 * args)` contract, results in rank order). Also builds the mpirun command line for
 * `bun run train --launcher mpi` (cli/train.ts).
 *
 * Failure: a rank that throws writes its error and calls MPI_Abort; one that dies (a signal,
 * SIGKILL included) is noticed by mpirun, which kills the other ranks and names the dead rank
 * ("mpirun noticed that process rank 1 with PID … exited on signal 9"). Either way launchMpi
 * rejects with a {@link LaunchError} naming the rank, with mpirun's own lines attached. No process
 * outlives the call: mpirun ends its ranks, and a `wallTimeoutS` guard kills mpirun itself
 * (SIGTERM, then SIGKILL after 5 s), which ends its ranks too.
 */

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve as resolvePath } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { deserialize, serialize, spawn, which } from "@zeromoe/kernels/runtime";
import { MPI_INSTALL_HINT } from "../comm/mpi/ffi.ts";
import { LaunchError, type RankFailure } from "./launch.ts";
import type { MpiRankError } from "./mpi-rank.ts";

/** Options of the mpirun command line. */
export interface MpirunOptions {
  /** Number of processes (`-np`). */
  worldSize: number;
  /** Open MPI hostfile (`--hostfile`); without one every rank runs on this host. */
  hostfile?: string;
  /** Extra mpirun arguments, placed before the program. */
  mpirunArgs?: readonly string[];
  /** Environment variables to forward to remote ranks (`-x NAME`), beyond the ZEROMOE_* ones set. */
  forwardEnv?: readonly string[];
}

/** The mpirun executable on PATH, or null. */
export function findMpirun(): string | null {
  return which("mpirun");
}

/**
 * `[mpirun, -np, N, …options, ]` to prepend to the program's argv. Adds `--allow-run-as-root`
 * when running as root (Open MPI refuses root otherwise), `--oversubscribe` without a hostfile
 * (more ranks than cores is allowed on one host, as with `local`), `--bind-to none` (a Bun process
 * runs several threads; binding it to one core would starve them) and `-x` for every set
 * ZEROMOE_* variable so remote ranks see them. Throws, saying what to install, when mpirun is
 * missing.
 */
export function mpirunCommand(o: MpirunOptions): string[] {
  const mpirun = findMpirun();
  if (!mpirun) throw new Error(`mpirun not found on PATH; ${MPI_INSTALL_HINT}`);
  if (!Number.isInteger(o.worldSize) || o.worldSize < 1) throw new Error(`mpi launch: world size must be a positive integer, got ${o.worldSize}`);
  const cmd = [mpirun, "-np", String(o.worldSize)];
  if (process.getuid?.() === 0) cmd.push("--allow-run-as-root");
  if (o.hostfile !== undefined) cmd.push("--hostfile", o.hostfile);
  else cmd.push("--oversubscribe");
  cmd.push("--bind-to", "none");
  const fwd = new Set([...Object.keys(process.env).filter((k) => k.startsWith("ZEROMOE_")), ...(o.forwardEnv ?? [])]);
  for (const k of fwd) cmd.push("-x", k);
  cmd.push(...(o.mpirunArgs ?? []));
  return cmd;
}

/** Options of {@link launchMpi}. */
export interface MpiLaunchOptions<A = unknown> extends MpirunOptions {
  /** Entry module: a file path (relative to the working directory) or a `file:` URL. */
  entry: string | URL;
  /** Passed to every rank's entry (structured-serialized through a file). */
  args?: A;
  /** Collective timeout in seconds (ranks' ZEROMOE_COMM_TIMEOUT_S); default that variable or 300. */
  timeoutS?: number;
  /** Kill the whole job after this many seconds (default: none). */
  wallTimeoutS?: number;
  /** Copy the ranks' output to this process's stdout/stderr as it comes (default false: kept for errors only). */
  echo?: boolean;
}

/** What a finished {@link launchMpi} job printed, for tests and error messages. */
export interface MpiJobOutput {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  signal: string | null;
  seconds: number;
}

function entryUrl(entry: string | URL): string {
  if (entry instanceof URL) return entry.href;
  if (/^(file|https?|data):/.test(entry)) return entry;
  return pathToFileURL(resolvePath(process.cwd(), entry)).href;
}

async function drain(stream: ReadableStream<Uint8Array>, echo: NodeJS.WriteStream | null): Promise<string> {
  const dec = new TextDecoder();
  let text = "";
  for await (const chunk of stream) {
    const s = dec.decode(chunk, { stream: true });
    text += s;
    echo?.write(s);
  }
  return text + dec.decode();
}

/** The last non-empty lines of `s`, at most `k`. */
function tail(s: string, k: number): string {
  return s.split("\n").filter((l) => l.trim() !== "").slice(-k).join("\n");
}

/**
 * Run `worldSize` ranks of `entry` under mpirun and resolve with their results in rank order.
 * Rejects with a {@link LaunchError} naming the failing rank (its error, or mpirun's report of a
 * dead rank) when the job fails; its `output` property holds what the job printed. Throws at once
 * when mpirun is missing or the entry file does not exist.
 */
export async function launchMpi<R = unknown, A = unknown>(o: MpiLaunchOptions<A>): Promise<R[]> {
  const { results } = await launchMpiWithOutput<R, A>(o);
  return results;
}

/** {@link launchMpi}, also returning what the job printed. */
export async function launchMpiWithOutput<R = unknown, A = unknown>(o: MpiLaunchOptions<A>): Promise<{ results: R[]; output: MpiJobOutput }> {
  const entry = entryUrl(o.entry);
  if (entry.startsWith("file:") && !existsSync(fileURLToPath(entry))) {
    throw new Error(`launchMpi: entry module not found: ${fileURLToPath(entry)} (from entry "${String(o.entry)}")`);
  }
  if (o.timeoutS !== undefined && !(o.timeoutS > 0)) throw new Error(`launchMpi: timeoutS must be > 0, got ${o.timeoutS}`);
  const dir = mkdtempSync(join(tmpdir(), "zeromoe-mpi-"));
  try {
    const argsFile = join(dir, "args.bin");
    writeFileSync(argsFile, new Uint8Array(serialize(o.args ?? null) as unknown as ArrayBuffer));
    const env: Record<string, string | undefined> = { ...process.env };
    if (o.timeoutS !== undefined) env.ZEROMOE_COMM_TIMEOUT_S = String(o.timeoutS);
    const saved = process.env.ZEROMOE_COMM_TIMEOUT_S;
    if (o.timeoutS !== undefined) process.env.ZEROMOE_COMM_TIMEOUT_S = String(o.timeoutS); // so -x forwards it
    let cmd: string[];
    try {
      cmd = [...mpirunCommand(o), process.execPath, fileURLToPath(new URL("./mpi-rank.ts", import.meta.url)), entry, argsFile, dir];
    } finally {
      if (o.timeoutS !== undefined) {
        if (saved === undefined) delete process.env.ZEROMOE_COMM_TIMEOUT_S;
        else process.env.ZEROMOE_COMM_TIMEOUT_S = saved;
      }
    }
    const t0 = performance.now();
    const proc = spawn(cmd, { env, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
    let guard: ReturnType<typeof setTimeout> | undefined;
    let killGuard: ReturnType<typeof setTimeout> | undefined;
    if (o.wallTimeoutS !== undefined) {
      guard = setTimeout(() => {
        proc.kill("SIGTERM");
        killGuard = setTimeout(() => proc.kill("SIGKILL"), 5000);
      }, o.wallTimeoutS * 1000);
    }
    const [stdout, stderr] = await Promise.all([drain(proc.stdout!, o.echo ? process.stdout : null), drain(proc.stderr!, o.echo ? process.stderr : null)]);
    const exitCode = await proc.exited;
    if (guard) clearTimeout(guard);
    if (killGuard) clearTimeout(killGuard);
    const output: MpiJobOutput = { stdout, stderr, exitCode, signal: proc.signalCode === null || proc.signalCode === undefined ? null : String(proc.signalCode), seconds: (performance.now() - t0) / 1000 };
    const resultsFile = join(dir, "results.bin");
    if (exitCode === 0 && existsSync(resultsFile)) {
      return { results: deserialize(readFileSync(resultsFile).buffer as ArrayBuffer) as R[], output };
    }
    throw mpiJobError(dir, output, o.worldSize);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A LaunchError for a failed mpirun job: the rank that wrote an error file, else the rank mpirun
 * names in its report, else rank -1 ("unknown"). The error carries `output`. */
function mpiJobError(dir: string, output: MpiJobOutput, worldSize: number): LaunchError & { output: MpiJobOutput } {
  const failures: RankFailure[] = [];
  for (const f of readdirSync(dir)) {
    const m = /^error-(\d+)\.bin$/.exec(f);
    if (!m) continue;
    const e = deserialize(readFileSync(join(dir, f)).buffer as ArrayBuffer) as MpiRankError;
    failures.push({ rank: e.rank, message: `${e.name}: ${e.message}`, stack: e.stack, aborted: e.aborted });
  }
  const mpirunSays = tail(output.stderr + "\n" + output.stdout, 12);
  let rank = (failures.find((f) => !f.aborted) ?? failures[0])?.rank;
  if (rank === undefined) {
    const named = /process rank (\d+)/.exec(output.stderr + output.stdout);
    rank = named ? Number(named[1]) : -1;
    failures.push({
      rank,
      message: `mpirun (world size ${worldSize}) exited with ${output.signal ? `signal ${output.signal}` : `status ${output.exitCode}`}: ${mpirunSays}`,
      aborted: false,
    });
  }
  const err = new LaunchError(rank, failures.sort((a, b) => a.rank - b.rank)) as LaunchError & { output: MpiJobOutput };
  err.output = output;
  return err;
}
