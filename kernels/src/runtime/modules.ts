/**
 * Module resolution and loading helpers the two runtimes name differently: {@link resolvePackage}
 * (`Bun.resolveSync` on Bun; Node's resolution through `node:module`'s createRequire on Deno, which
 * reads the same node_modules folder that `bun install` filled) and {@link requireModule} (a
 * CommonJS package from an ES module).
 */
import { createRequire } from "node:module";
import { join } from "node:path";
import { RUNTIME } from "./detect.ts";

/**
 * The file that bare specifier `specifier` (a package, or a package's subpath such as
 * "pkg/package.json") resolves to from directory `fromDir`, looking in `fromDir/node_modules`
 * and the folders above. @throws an Error (the runtime's, naming the specifier) when not found.
 */
export function resolvePackage(specifier: string, fromDir: string): string {
  if (RUNTIME === "bun") return Bun.resolveSync(specifier, fromDir);
  return createRequire(join(fromDir, "__resolve__.js")).resolve(specifier);
}

/** The CommonJS module `specifier` required from the module at URL or path `from` (pass
 * `import.meta.url`). @throws when it is not installed there. */
export function requireModule(specifier: string, from: string): unknown {
  return createRequire(from)(specifier);
}
