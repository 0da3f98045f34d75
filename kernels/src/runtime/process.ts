/**
 * Child processes and executables, the same on Bun and Deno: {@link spawn} (the subset of
 * `Bun.spawn` the engine uses: argv, env, cwd, stdio "inherit" | "pipe" | "ignore"; `exited`,
 * `kill`, `signalCode`, piped output as a web ReadableStream) — `Bun.spawn` itself on Bun,
 * `node:child_process` on Deno; {@link which} (an executable on PATH); {@link scriptArgv} (the
 * command line that runs a TypeScript file on this runtime).
 */
import { spawn as nodeSpawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { Readable } from "node:stream";
import { RUNTIME } from "./detect.ts";

/** Where a child's standard stream goes. */
export type StdioMode = "inherit" | "pipe" | "ignore";

/** Options of {@link spawn}. */
export interface SpawnOptions {
  /** The child's environment (default: this process's). */
  env?: Record<string, string | undefined>;
  /** The child's working directory (default: this process's). */
  cwd?: string;
  /** stdin, stdout, stderr together (like Bun's `stdio`); the separate keys below win. */
  stdio?: readonly [StdioMode, StdioMode, StdioMode];
  stdin?: StdioMode;
  stdout?: StdioMode;
  stderr?: StdioMode;
}

/** A running child process. */
export interface Subprocess {
  /** Its process id. */
  readonly pid: number;
  /** Resolves with its exit status once it has ended (when killed by a signal: Bun's convention,
   * 128 + the signal number on Bun, and the same on Deno). */
  readonly exited: Promise<number>;
  /** The signal that ended it ("SIGTERM"…), else null (also while it runs). */
  readonly signalCode: string | null;
  /** Its stdout / stderr when "pipe", else null. */
  readonly stdout: ReadableStream<Uint8Array> | null;
  readonly stderr: ReadableStream<Uint8Array> | null;
  /** Send a signal (default SIGTERM). @throws when the process is gone (Bun) — callers catch. */
  kill(signal?: NodeJS.Signals | number): void;
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGUSR1: 10, SIGSEGV: 11, SIGUSR2: 12, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

/**
 * Start `argv[0]` with arguments `argv[1..]` (no shell). @throws when argv is empty; a program that
 * does not exist throws on Bun and ends with status 127 (and an error on stderr) on Deno.
 */
export function spawn(argv: readonly string[], opts: SpawnOptions = {}): Subprocess {
  if (argv.length === 0) throw new Error("spawn: argv is empty (expected the program and its arguments)");
  const [si, so, se] = opts.stdio ?? ["ignore", "pipe", "inherit"];
  const stdin = opts.stdin ?? (opts.stdio ? si : "ignore");
  const stdout = opts.stdout ?? (opts.stdio ? so : "pipe");
  const stderr = opts.stderr ?? (opts.stdio ? se : "inherit");
  if (RUNTIME === "bun") {
    const p = Bun.spawn([...argv], { env: opts.env, cwd: opts.cwd, stdin, stdout, stderr });
    return {
      pid: p.pid,
      exited: p.exited,
      get signalCode() {
        return p.signalCode === null || p.signalCode === undefined ? null : String(p.signalCode);
      },
      stdout: stdout === "pipe" ? (p.stdout as ReadableStream<Uint8Array>) : null,
      stderr: stderr === "pipe" ? (p.stderr as ReadableStream<Uint8Array>) : null,
      kill: (signal) => p.kill(signal),
    };
  }
  const child = nodeSpawn(argv[0]!, argv.slice(1), { env: opts.env as NodeJS.ProcessEnv | undefined, cwd: opts.cwd, stdio: [stdin, stdout, stderr] });
  let signalCode: string | null = null;
  const exited = new Promise<number>((resolve) => {
    child.on("error", (e) => {
      process.stderr.write(`spawn ${argv[0]}: ${e.message}\n`);
      resolve(127);
    });
    child.on("exit", (code, signal) => {
      signalCode = signal;
      resolve(code ?? 128 + (signal ? SIGNALS[signal] ?? 0 : 0));
    });
  });
  const web = (s: Readable | null): ReadableStream<Uint8Array> | null => (s === null ? null : (Readable.toWeb(s) as ReadableStream<Uint8Array>));
  return {
    get pid() {
      return child.pid ?? -1;
    },
    exited,
    get signalCode() {
      return signalCode;
    },
    stdout: web(child.stdout),
    stderr: web(child.stderr),
    kill: (signal) => {
      child.kill(signal);
    },
  };
}

/** The absolute path of executable `name` on PATH (or `name` itself when it is a path to an
 * executable file), else null. */
export function which(name: string): string | null {
  const executable = (p: string): boolean => {
    try {
      if (!statSync(p).isFile()) return false;
      accessSync(p, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (name.includes("/")) return executable(name) ? (isAbsolute(name) ? name : join(process.cwd(), name)) : null;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const p = join(dir, name);
    if (executable(p)) return p;
  }
  return null;
}

/**
 * The command line that runs TypeScript file `script` on this runtime, as a new process:
 * `[bun, script]` on Bun; `[deno, "run", "--allow-all", script]` on Deno (the permissions of
 * deno.json's tasks: the engine reads and writes files, starts workers and processes, reads the
 * environment). Arguments for the script follow.
 */
export function scriptArgv(script: string): string[] {
  return RUNTIME === "bun" ? [process.execPath, script] : [process.execPath, "run", "--allow-all", script];
}
