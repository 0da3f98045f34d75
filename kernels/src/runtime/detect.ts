/**
 * Which JavaScript runtime runs this process: Bun or Deno (the two the engine supports, README
 * "Bun or Deno"). Read from `process.versions`, which both runtimes provide; no other file needs to
 * test for a runtime — the rest of kernels/src/runtime does it for them.
 */

/** The runtimes the engine runs on. */
export type RuntimeName = "bun" | "deno";

function detect(): RuntimeName {
  const v = (globalThis as { process?: { versions?: Record<string, string | undefined> } }).process?.versions ?? {};
  if (v.bun !== undefined) return "bun";
  if (v.deno !== undefined) return "deno";
  throw new Error("ZeroMoE runs on Bun or Deno: process.versions names neither (is this Node.js? use `bun run train` or `deno task train`)");
}

/** The runtime of this process. @throws on a runtime that is neither Bun nor Deno (at import). */
export const RUNTIME: RuntimeName = detect();

/** The runtime's version string, e.g. "1.4.5" (Bun) or "2.9.6" (Deno). */
export function runtimeVersion(): string {
  return RUNTIME === "bun" ? process.versions.bun! : process.versions.deno!;
}

/** "Bun 1.4.5" or "Deno 2.9.6": for reports and bench tables. */
export function runtimeLabel(): string {
  return `${RUNTIME === "bun" ? "Bun" : "Deno"} ${runtimeVersion()}`;
}
