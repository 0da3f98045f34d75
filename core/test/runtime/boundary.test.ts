/**
 * The runtime boundary (issue 33; kernels/src/runtime/index.ts): no source file of kernels/, core/,
 * plugins/ or examples/plugins/ (src/ and bench/ folders, the plugin suites plugins/<name>/test and the
 * kernel conformance cases kernels/test/ops, which
 * run under both `bun test` and `deno test`; the other tests may stay on bun:test) names a
 * runtime-specific API — the `Bun` or `Deno` globals, a `bun:` module (bun:ffi, bun:jsc…),
 * Bun's `import.meta.dir` / `.path` / `.file` / `.require`, or CommonJS `require(…)` (not defined in
 * Deno's ES modules) — except the files of the runtime layer, kernels/src/runtime/. Read with
 * TypeScript's parser, so comments and strings that mention Bun do not count.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import ts from "typescript";

const REPO = resolve(import.meta.dirname, "../../..");

/** The files allowed to name runtime-specific APIs: the runtime layer. */
const ALLOWED_DIR = "kernels/src/runtime/";

/** Folders scanned (relative to the repository), each recursively for .ts files. */
function scannedRoots(): string[] {
  const roots = ["kernels/src", "kernels/bench", "kernels/test/runtime", "kernels/test/ops", "core/src", "core/bench"];
  for (const group of ["plugins", "examples/plugins"]) {
    const g = join(REPO, group);
    if (!existsSync(g)) continue;
    for (const p of readdirSync(g)) for (const sub of group === "plugins" ? ["src", "bench", "test"] : ["src", "bench"]) roots.push(`${group}/${p}/${sub}`);
  }
  return roots.filter((r) => existsSync(join(REPO, r)));
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (e === "node_modules") continue;
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (e.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** Each runtime-specific use in `text` (file name `name`), as "line: what". */
export function runtimeSpecificUses(name: string, text: string): string[] {
  const sf = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const at = (n: ts.Node, what: string): void => {
    found.push(`${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}: ${what}`);
  };
  const moduleSpec = (s: ts.Expression | undefined, n: ts.Node): void => {
    if (s !== undefined && ts.isStringLiteralLike(s) && s.text.startsWith("bun:")) at(n, `module "${s.text}"`);
  };
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) moduleSpec(n.moduleSpecifier, n);
    else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument)) moduleSpec(n.argument.literal as ts.Expression, n);
    else if (ts.isCallExpression(n)) {
      if (n.expression.kind === ts.SyntaxKind.ImportKeyword) moduleSpec(n.arguments[0], n);
      if (ts.isIdentifier(n.expression) && n.expression.text === "require") at(n, "require(…)");
    } else if (ts.isPropertyAccessExpression(n) && ts.isMetaProperty(n.expression) && n.expression.keywordToken === ts.SyntaxKind.ImportKeyword) {
      if (["dir", "path", "file", "require"].includes(n.name.text)) at(n, `import.meta.${n.name.text}`);
    } else if (ts.isIdentifier(n) && (n.text === "Bun" || n.text === "Deno")) {
      const p = n.parent;
      const isMemberName = (ts.isPropertyAccessExpression(p) && p.name === n) || (ts.isQualifiedName(p) && p.right === n) || (ts.isPropertyAssignment(p) && p.name === n) || (ts.isPropertySignature(p) && p.name === n);
      if (!isMemberName) at(n, `the ${n.text} global`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

describe("runtime boundary", () => {
  test("the scanner finds every kind of runtime-specific use, and none in comments or strings", () => {
    const src = [
      'import { ptr } from "bun:ffi";',
      'export { serialize } from "bun:jsc";',
      'const m = await import("bun:sqlite");',
      "type P = import(\"bun:ffi\").Pointer;",
      "Bun.sleepSync(1);",
      "const v = Deno.version;",
      "let t: Bun.Subprocess;",
      "if (typeof Bun !== 'undefined') {}",
      "const d = import.meta.dir;",
      "const h = require(\"hjson\");",
      "// Bun.spawn in a comment, import.meta.dir too",
      'const s = "Bun.file and bun:ffi in a string";',
      "const ok = import.meta.dirname + import.meta.url + String(x.Bun) + ({ Deno: 1 }).Deno;",
    ].join("\n");
    expect(runtimeSpecificUses("probe.ts", src)).toEqual([
      '1: module "bun:ffi"',
      '2: module "bun:jsc"',
      '3: module "bun:sqlite"',
      '4: module "bun:ffi"',
      "5: the Bun global",
      "6: the Deno global",
      "7: the Bun global",
      "8: the Bun global",
      "9: import.meta.dir",
      "10: require(…)",
    ]);
  });

  test("only kernels/src/runtime/ names Bun, Deno, bun: modules, import.meta.dir/path/file/require or require()", () => {
    const offenders: string[] = [];
    let scanned = 0;
    for (const root of scannedRoots()) {
      for (const f of tsFiles(join(REPO, root))) {
        const rel = relative(REPO, f);
        if (rel.startsWith(ALLOWED_DIR)) continue;
        scanned++;
        for (const u of runtimeSpecificUses(rel, readFileSync(f, "utf8"))) offenders.push(`${rel}:${u}`);
      }
    }
    expect(scanned).toBeGreaterThan(300);
    expect(offenders).toEqual([]);
  });

  test("the runtime layer itself is where the runtime-specific uses are", () => {
    const layer = tsFiles(join(REPO, ALLOWED_DIR)).flatMap((f) => runtimeSpecificUses(f, readFileSync(f, "utf8")));
    expect(layer.length).toBeGreaterThan(0);
  });
});
