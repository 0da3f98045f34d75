/**
 * Command line launcher: `bun core/src/launch/cli.ts [--world-size N] [--timeout-s S]
 * [--arena-mb M] [--print-results] <entry.ts> [args…]` runs N ranks (default 1) of the entry
 * module (see launch.ts); the remaining arguments reach every rank as a string array. Exit status
 * 0 when every rank returned; 1 with the failing rank and its error on stderr otherwise; 2 on a
 * usage error.
 */

import { launch, LaunchError } from "./launch.ts";

const USAGE = "usage: bun core/src/launch/cli.ts [--world-size N] [--timeout-s S] [--arena-mb M] [--print-results] <entry.ts> [args...]";

/** Parse argv (without the runtime and script), run the job, return the exit status. */
export async function main(argv: string[]): Promise<number> {
  let worldSize = 1;
  let timeoutS: number | undefined;
  let slotBytes: number | undefined;
  let printResults = false;
  let i = 0;
  const num = (flag: string, v: string | undefined): number => {
    const x = Number(v);
    if (v === undefined || !Number.isFinite(x) || x <= 0) throw new Error(`${flag} needs a positive number, got ${v}`);
    return x;
  };
  try {
    for (; i < argv.length && argv[i].startsWith("--"); i++) {
      const a = argv[i];
      if (a === "--world-size") worldSize = num(a, argv[++i]);
      else if (a === "--timeout-s") timeoutS = num(a, argv[++i]);
      else if (a === "--arena-mb") slotBytes = Math.floor(num(a, argv[++i]) * 1048576);
      else if (a === "--print-results") printResults = true;
      else throw new Error(`unknown option ${a}`);
    }
    if (i >= argv.length) throw new Error("missing entry module");
  } catch (e) {
    console.error(`launch: ${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const entry = argv[i];
  const args = argv.slice(i + 1);
  try {
    const results = await launch({ worldSize, entry, args, timeoutS, slotBytes });
    if (printResults) console.log(JSON.stringify(results));
    return 0;
  } catch (e) {
    if (e instanceof LaunchError) console.error(`launch: job failed (world_size ${worldSize}): ${e.message}`);
    else console.error(`launch: ${(e as Error).stack ?? String(e)}`);
    return 1;
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
