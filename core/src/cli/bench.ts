/**
 * `bun run bench <name> [args…]`: runs the benchmark `<name>`.
 *
 * A benchmark is a file `<package>/bench/<name>.ts` in one of the workspace packages searched
 * below (kernels, core, then every plugin); it is imported and its exported `main(args)` is
 * awaited, so benchmarks written by other areas (`comm`, `zero`, `train`, `moe`, `checkpoint`, …) are
 * picked up by dropping a file in place. With no name, or `--list`, the available benchmarks are
 * listed. Exits with status 2 on an unknown name, 1 when the benchmark throws.
 */
import { existsSync, readdirSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";

/** Signature every benchmark module exports. */
export type BenchMain = (args: string[]) => Promise<void> | void;

/** Repository root (two folders above core/src/cli). */
const ROOT = resolve(import.meta.dirname, "..", "..", "..");

/** Folders searched for `<name>.ts`, in order. */
export function benchDirs(root: string = ROOT): string[] {
  const dirs = [join(root, "kernels", "bench"), join(root, "core", "bench")];
  const plugins = join(root, "plugins");
  if (existsSync(plugins)) {
    for (const p of readdirSync(plugins).sort()) dirs.push(join(plugins, p, "bench"));
  }
  return dirs.filter((d) => existsSync(d));
}

/** Every benchmark found: name → file. A name defined twice keeps the first folder's file. */
export function listBenches(root: string = ROOT): Map<string, string> {
  const found = new Map<string, string>();
  for (const d of benchDirs(root)) {
    for (const f of readdirSync(d).sort()) {
      if (!f.endsWith(".ts") || f.endsWith(".d.ts") || f.startsWith("_")) continue;
      const name = basename(f, ".ts");
      if (!found.has(name)) found.set(name, join(d, f));
    }
  }
  return found;
}

/** Runs benchmark `name` with `args`; throws an Error naming the file when it has no `main`. */
export async function runBench(name: string, args: string[], root: string = ROOT): Promise<void> {
  const benches = listBenches(root);
  const file = benches.get(name);
  if (!file) {
    throw new Error(`bench: unknown benchmark "${name}". Available: ${[...benches.keys()].join(", ") || "(none)"}`);
  }
  const mod = (await import(file)) as { main?: BenchMain };
  if (typeof mod.main !== "function") throw new Error(`bench: ${file} must export a function main(args: string[])`);
  await mod.main(args);
}

/**
 * The help of benchmark `name`: its exported `USAGE` text, else the doc comment at the head of its
 * file (every benchmark has one), else a line naming the file.
 * @throws Error for an unknown benchmark (as {@link runBench}).
 */
export async function benchHelp(name: string, root: string = ROOT): Promise<string> {
  const file = listBenches(root).get(name);
  if (!file) throw new Error(`bench: unknown benchmark "${name}". Available: ${[...listBenches(root).keys()].join(", ") || "(none)"}`);
  const mod = (await import(file)) as { USAGE?: unknown };
  if (typeof mod.USAGE === "string") return mod.USAGE;
  const head = /^\s*\/\*\*([\s\S]*?)\*\//.exec(await readFile(file, "utf8"));
  const doc = head ? head[1]!.split("\n").map((l) => l.replace(/^\s*\* ?/, "")).join("\n").trim() : "";
  return doc ? `bun run bench ${name} (${file.slice(root.length + 1)}):\n${doc}` : `usage: bun run bench ${name} [args…] (${file.slice(root.length + 1)})`;
}

if (import.meta.main) {
  const [name, ...rest] = process.argv.slice(2);
  if (!name || name === "--list" || name === "-h" || name === "--help") {
    const benches = listBenches();
    console.log("usage: bun run bench <name> [args…]\navailable benchmarks:");
    for (const [n, f] of benches) console.log(`  ${n.padEnd(12)} ${f.slice(ROOT.length + 1)}`);
    process.exit(name ? 0 : 2);
  }
  try {
    if (rest.includes("--help") || rest.includes("-h")) {
      console.log(await benchHelp(name));
      process.exit(0);
    }
    await runBench(name, rest);
  } catch (e) {
    console.error(e instanceof Error ? e.message : e);
    process.exit(listBenches().has(name) ? 1 : 2);
  }
}
