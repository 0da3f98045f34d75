#!/usr/bin/env bun
/**
 * `zeromoe <command> [args…]`: the command-line tools from any folder, in or out of the
 * repository (`bun run <command>` works only at the repository root and resets the working
 * directory to it). Commands: train, eval, generate, zero-to-fp32, report, plot, bench — each
 * runs its core/src/cli/<command>.ts in the caller's working directory, with the caller's
 * arguments, and exits with its status. Install: `bun run install-command` (writes a `zeromoe`
 * shim into ~/.bun/bin, or the folder given), or run `bun <repo>/core/src/cli/zeromoe.ts …`.
 * Exit status: the command's; 2 for an unknown or missing command.
 */
import { join } from "node:path";
import { scriptArgv, spawn } from "@zeromoe/kernels/runtime";

/** The commands, each a core/src/cli/<name>.ts. */
export const COMMANDS = ["train", "eval", "generate", "zero-to-fp32", "report", "plot", "bench"] as const;

/** Usage text. */
export const ZEROMOE_USAGE = `usage: zeromoe <command> [args…]   (commands: ${COMMANDS.join(", ")}; zeromoe <command> --help for each)`;

/** The script a command runs, or null for an unknown one. */
export function commandScript(name: string): string | null {
  return (COMMANDS as readonly string[]).includes(name) ? join(import.meta.dirname, `${name}.ts`) : null;
}

if (import.meta.main) {
  const [name, ...rest] = process.argv.slice(2);
  if (name === undefined || name === "-h" || name === "--help") {
    console.log(ZEROMOE_USAGE);
    process.exit(name === undefined ? 2 : 0);
  }
  const script = commandScript(name);
  if (script === null) {
    console.error(`zeromoe: unknown command ${JSON.stringify(name.slice(0, 80))}\n${ZEROMOE_USAGE}`);
    process.exit(2);
  }
  const child = spawn([...scriptArgv(script), ...rest], { stdin: "inherit", stdout: "inherit", stderr: "inherit" });
  // Ctrl-C reaches the command too (same process group): wait for its clean stop; forward SIGTERM
  process.on("SIGINT", () => {});
  process.on("SIGTERM", () => child.kill("SIGTERM"));
  const code = await child.exited;
  process.exit(child.signalCode ? 128 + (({ SIGINT: 2, SIGTERM: 15, SIGKILL: 9 }) as Record<string, number>)[child.signalCode]! || 1 : code);
}
