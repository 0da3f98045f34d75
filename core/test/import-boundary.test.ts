/**
 * Packages are entered only through their declared exports (docs/architecture.md "Packages and
 * layers"): no file of one workspace package (kernels, core, plugins/*, examples/plugins/*, the
 * root application) imports a file of another by relative path (`../../../core/src/...`), and a
 * package-name import (`@zeromoe/core/tensor`) must name an entry in that package's `exports`
 * (so `@zeromoe/kernels/src/backend.ts` fails). Import specifiers are read with TypeScript's own
 * pre-processor (static, type-only, re-exports and dynamic `import("…")`; comments ignored).
 *
 * Regression (issue 10): plugins/moe/src made a dozen `../../../core/src/...` imports and plugin
 * tests imported core/test/engine/fixtures.ts; an installed plugin could not have run.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

const REPO = resolve(import.meta.dir, "../..");

interface Pkg {
  name: string;
  dir: string;
  /** Declared export subpaths ("." , "./tensor" …), or null when the package declares none. */
  exports: Set<string> | null;
}

/** The workspace packages of the repository at `root` (root package.json `workspaces`, globs of
 * the form `dir` or `dir/*`), the root package included. */
function workspacePackages(root: string): Pkg[] {
  const read = (dir: string): Pkg => {
    const pj = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; exports?: Record<string, unknown> | string };
    const ex = pj.exports === undefined ? null : typeof pj.exports === "string" ? new Set(["."]) : new Set(Object.keys(pj.exports));
    return { name: pj.name, dir, exports: ex };
  };
  const rootPj = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { workspaces?: string[] };
  const out: Pkg[] = [read(root)];
  for (const w of rootPj.workspaces ?? []) {
    const dirs = w.endsWith("/*") ? readdirSync(join(root, w.slice(0, -2))).map((d) => join(root, w.slice(0, -2), d)) : [join(root, w)];
    for (const d of dirs) if (existsSync(join(d, "package.json"))) out.push(read(d));
  }
  return out;
}

/** Source files under `dir` (no node_modules, no dot folders). */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === "node_modules" || e.name.startsWith(".")) continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|tsx|mts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** Every import that crosses a package boundary other than through a declared export, as
 * "file: \"specifier\" — why" lines (paths relative to `root`). */
function boundaryViolations(root: string): string[] {
  const pkgs = workspacePackages(root);
  // deepest package first, so a file belongs to its innermost package
  const byDepth = [...pkgs].sort((a, b) => b.dir.length - a.dir.length);
  const owner = (file: string): Pkg => byDepth.find((p) => file === p.dir || file.startsWith(p.dir + sep))!;
  const byName = new Map(pkgs.map((p) => [p.name, p]));
  const out: string[] = [];
  for (const file of sourceFiles(root)) {
    const from = owner(file);
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    for (const { fileName: spec } of importedFiles) {
      const where = `${relative(root, file)}: "${spec}"`;
      if (spec.startsWith(".") || spec.startsWith("/")) {
        const to = owner(resolve(dirname(file), spec));
        if (to !== from) out.push(`${where} — reaches into package ${to.name} by path; import it by name through its exports (${[...(to.exports ?? ["."])].join(", ")})`);
        continue;
      }
      const m = /^(@[^/]+\/[^/]+|[^@/][^/]*)(\/.*)?$/.exec(spec);
      if (!m) continue;
      const to = byName.get(m[1]!);
      if (!to || to.exports === null) continue;
      const sub = m[2] ? "." + m[2] : ".";
      if (!to.exports.has(sub)) out.push(`${where} — ${to.name} does not export "${sub}" (declared: ${[...to.exports].join(", ")})`);
    }
  }
  return out;
}

describe("package boundaries", () => {
  test("the checker flags path imports into another package and undeclared subpaths (fixture tree)", () => {
    const root = mkdtempSync(join(tmpdir(), "zeromoe-boundary-"));
    try {
      const put = (p: string, text: string) => {
        mkdirSync(dirname(join(root, p)), { recursive: true });
        writeFileSync(join(root, p), text);
      };
      put("package.json", JSON.stringify({ name: "app", workspaces: ["kernels", "core", "plugins/*"] }));
      put("kernels/package.json", JSON.stringify({ name: "@x/kernels", exports: { ".": "./src/index.ts" } }));
      put("core/package.json", JSON.stringify({ name: "@x/core", exports: { ".": "./src/index.ts", "./tensor": "./src/tensor/index.ts" } }));
      put("plugins/p/package.json", JSON.stringify({ name: "@x/plugin-p", exports: { ".": "./src/index.ts" } }));
      put("kernels/src/index.ts", 'export * from "./backend.ts";\n');
      put("core/src/index.ts", 'import { B } from "@x/kernels";\nimport type { V } from "../../kernels/src/backend.ts";\nexport * from "./tensor/index.ts";\n');
      put("plugins/p/src/index.ts", [
        'import { a } from "@x/core";',
        'import { t } from "@x/core/tensor";',
        'import { own } from "./own.ts";',
        '// import { c } from "../../../core/src/comment.ts";',
        'import { bad1 } from "../../../core/src/tensor/tape.ts";',
        'export { bad2 } from "@x/core/src/engine/engine.ts";',
        'const bad3 = await import("@x/kernels/src/backend.ts");',
        'import type { Bad4 } from "../../../core/test/fixtures.ts";',
      ].join("\n"));
      put("plugins/p/test/p.test.ts", 'import { own } from "../src/index.ts";\nimport { launch } from "@x/core";\n');
      put("scripts/tool.ts", 'import { x } from "../core/src/index.ts";\n');
      const v = boundaryViolations(root);
      expect(v.map((l) => l.split(" — ")[0])).toEqual([
        'core/src/index.ts: "../../kernels/src/backend.ts"',
        'plugins/p/src/index.ts: "../../../core/src/tensor/tape.ts"',
        'plugins/p/src/index.ts: "@x/core/src/engine/engine.ts"',
        'plugins/p/src/index.ts: "@x/kernels/src/backend.ts"',
        'plugins/p/src/index.ts: "../../../core/test/fixtures.ts"',
        'scripts/tool.ts: "../core/src/index.ts"',
      ].sort((a, b) => v.findIndex((l) => l.startsWith(a)) - v.findIndex((l) => l.startsWith(b))));
      expect(v.length).toBe(6);
      expect(v.find((l) => l.includes("@x/core/src/engine"))).toContain('@x/core does not export "./src/engine/engine.ts"');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("no file of this repository imports another package's internals (plugins and examples included)", () => {
    const pkgs = workspacePackages(REPO).map((p) => p.name);
    expect(pkgs).toContain("@zeromoe/core");
    expect(pkgs).toContain("@zeromoe/kernels");
    expect(pkgs).toContain("@zeromoe/plugin-moe");
    expect(pkgs).toContain("zeromoe-plugin-grad-noise");
    expect(statSync(join(REPO, "plugins")).isDirectory()).toBe(true);
    expect(boundaryViolations(REPO)).toEqual([]);
  });
});
