/**
 * Worker of the supervised fuzz (supervise.ts): `bun worker.ts <reader> <seedDir> <workDir>`.
 * Builds the reader's seeds (cached in seedDir), prints `ready`, then reads one case per stdin line
 * (`<case> <seed>`) and answers one JSON line per case:
 * `{case, outcome: "ok" | "clean" | "crash", name, message (first 300 characters), messageLength, rssMiB}`.
 * The supervisor bounds each case's time and the worker's resident memory and restarts it after a
 * hang or an overrun.
 */
import { mkdirSync, rmSync } from "node:fs";
import { ROOT as RUNNER_ROOT } from "../checkpoint/fuzz-runner.ts";
import { rng } from "../checkpoint/fuzz-kit.ts";
import { isCleanError, READERS } from "./readers.ts";

const [name, seedDir, workDir] = process.argv.slice(2) as [string, string, string];
const reader = READERS[name];
if (!reader || !seedDir || !workDir) {
  console.error(`usage: bun worker.ts <${Object.keys(READERS).join("|")}> <seedDir> <workDir>`);
  process.exit(2);
}
rmSync(RUNNER_ROOT, { recursive: true, force: true }); // the decoder fuzz's scratch directory: unused here
mkdirSync(seedDir, { recursive: true });
mkdirSync(workDir, { recursive: true });
await reader.prepare(seedDir);
process.stdout.write("ready\n");

// quiet: readers may warn on stdout/stderr; the protocol is the worker's own lines
const write = process.stdout.write.bind(process.stdout);
console.log = () => {};
console.warn = () => {};
console.error = () => {};

let buf = "";
for await (const chunk of Bun.stdin.stream()) {
  buf += new TextDecoder().decode(chunk);
  let nl: number;
  while ((nl = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    const [c, s] = line.split(" ").map(Number) as [number, number];
    let outcome: "ok" | "clean" | "crash" = "ok";
    let errName = "";
    let message = "";
    try {
      await reader.one(seedDir, workDir, rng((s ^ Math.imul(c + 1, 0x9e3779b1)) >>> 0 || 1));
    } catch (e) {
      outcome = isCleanError(e) ? "clean" : "crash";
      errName = (e as Error)?.name ?? typeof e;
      message = e instanceof Error ? (outcome === "crash" ? (e.stack ?? e.message) : e.message) : String(e);
    }
    if (c % 20 === 19) Bun.gc(true);
    write(JSON.stringify({ case: c, outcome, name: errName, message: message.slice(0, 300), messageLength: message.length, rssMiB: process.memoryUsage.rss() / 2 ** 20 }) + "\n");
  }
}
