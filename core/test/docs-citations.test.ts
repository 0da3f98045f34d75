/**
 * The repository stands on its own: its files cite only files inside it, and every citation of a
 * docs/ page names a section that page has.
 *
 * - Outside paths: no tracked file (code, comments, docs, scripts) names a path outside the
 *   repository — an absolute path under the machine's work folder, a `../shared/` folder beside the
 *   checkout, or a bare `design.md`/`domain.md` that is not the repository's `docs/domain.md` —
 *   and no Markdown link resolves above the repository root.
 * - Sections: `docs/X.md` must exist; `docs/X.md §N` (also `§N–M` and `§N, §M`) needs a heading
 *   numbered `N.` in it; `docs/X.md#slug` a heading with that GitHub slug; `docs/X.md "Title"` (or
 *   `docs/X.md, "Title"`) a heading that starts with Title (backticks and a leading section number
 *   such as `1.2.1` aside). Headings inside code fences do not count.
 *
 * The checks are first run on made-up text, so that a checker that finds nothing fails here too.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const REPO = resolve(import.meta.dir, "../..");
const SELF = relative(REPO, import.meta.path);

/** Endings of the text files whose citations are checked. */
const TEXT = /\.(ts|js|mjs|cjs|py|sh|md|json|wgsl|c|h|toml|ya?ml|txt)$|(^|\/)(Makefile|run)$/;

/** Names of paths outside the repository (each with what it is, for the failure message). */
const OUTSIDE: Array<[RegExp, string]> = [
  [/\/work\//, "an absolute path of the machine's work folder"],
  [/\.\.\/shared\//, "a folder beside the checkout"],
  [/(?<!docs\/)\b(?:design|domain)\.md\b/, "a design or domain page outside docs/ (the repository's is docs/domain.md)"],
];

/** Where `text` names a path outside the repository: `line: what`. */
function outsidePaths(text: string): string[] {
  const out: string[] = [];
  text.split("\n").forEach((line, i) => {
    for (const [re, what] of OUTSIDE) if (re.test(line)) out.push(`${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
  });
  return out;
}

/** GitHub's anchor slug of a heading's text: lower case, punctuation dropped, spaces → `-`. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
}

/** The headings of a Markdown text (without the `#`s), code fences skipped. */
function headings(md: string): string[] {
  const out: string[] = [];
  let fence = false;
  for (const line of md.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fence = !fence;
    else if (!fence) {
      const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (m) out.push(m[1]!);
    }
  }
  return out;
}

/** A heading or quoted title as compared: lower case, without backticks. */
function plain(s: string): string {
  return s.replace(/`/g, "").toLowerCase();
}

/** A citation `docs/X.md` and what follows it: a § list, a #slug or a quoted heading. */
const CITATION = /docs\/([\w.-]+\.md)(?:(\s?§\s?\d+(?:\s?[–-]\s?\d+)?(?:,\s?§\s?\d+(?:\s?[–-]\s?\d+)?)*)|#([\w-]+)|,?\s"([^"\n]{1,100})")?/g;

/**
 * The citations of docs/ pages in `text` that name no existing page or section. `docs` maps a
 * page's file name (`domain.md`) to its text; a missing page is a missing key.
 */
function brokenCitations(text: string, docs: Map<string, string>): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(CITATION)) {
    const [all, page, sections, anchor, title] = m;
    const line = text.slice(0, m.index).split("\n").length;
    const md = docs.get(page!);
    if (md === undefined) {
      out.push(`${line}: docs/${page} does not exist`);
      continue;
    }
    const hs = headings(md);
    if (sections) {
      const numbers = hs.map((h) => /^§?\s?(\d+)[.\s]/.exec(h)?.[1]).filter((n): n is string => n !== undefined);
      for (const n of sections.match(/\d+/g)!) if (!numbers.includes(n)) out.push(`${line}: docs/${page} has no section ${n} (${all})`);
    } else if (anchor) {
      if (!hs.some((h) => slug(h) === anchor)) out.push(`${line}: docs/${page} has no heading #${anchor}`);
    } else if (title) {
      const t = plain(title);
      if (!hs.some((h) => plain(h).startsWith(t) || plain(h).replace(/^§?\d+(\.\d+)*\.?\s+/, "").startsWith(t))) out.push(`${line}: docs/${page} has no heading "${title}"`);
    }
  }
  return out;
}

/** Relative Markdown link targets in `md` (file `file`, repository-relative) that leave the
 * repository or name nothing there. */
function brokenLinks(md: string, file: string, root: string): string[] {
  const out: string[] = [];
  for (const m of md.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!.split("#")[0]!;
    if (target === "" || /^[a-z]+:/i.test(target)) continue;
    const abs = resolve(root, dirname(file), target);
    const rel = relative(root, abs);
    if (rel.startsWith("..")) out.push(`${target}: outside the repository`);
    else if (!existsSync(abs)) out.push(`${target}: no such file`);
  }
  return out;
}

/** The repository's tracked and new (not ignored) text files. */
function repoFiles(): string[] {
  const r = Bun.spawnSync(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: REPO });
  if (r.exitCode !== 0) throw new Error(`git ls-files failed: ${r.stderr.toString()}`);
  return r.stdout
    .toString()
    .split("\0")
    .filter((f) => f !== "" && f !== SELF && TEXT.test(f) && existsSync(join(REPO, f)) && statSync(join(REPO, f)).size < 4 << 20);
}

function docsPages(): Map<string, string> {
  const pages = new Map<string, string>();
  for (const f of repoFiles()) if (/^docs\/[^/]+\.md$/.test(f)) pages.set(f.slice(5), readFileSync(join(REPO, f), "utf8"));
  return pages;
}

describe("the checkers find what they look for", () => {
  const docs = new Map([["a.md", "# A\n\n## 1. One\n\n```\n## 2. Not a heading\n```\n## Two words `code` here\n### 1.2 The `x` part\n"]]);

  test("outside paths", () => {
    expect(outsidePaths("see ../shared/x.txt\nok docs/domain.md §1\n(design.md \"x\")\n/work/main/a.ts")).toHaveLength(3);
    expect(outsidePaths("docs/domain.md §4; docs/architecture.md")).toEqual([]);
  });

  test("sections, slugs and titles", () => {
    expect(brokenCitations("docs/a.md §1 and docs/a.md#two-words-code-here, docs/a.md \"Two words\"", docs)).toEqual([]);
    expect(brokenCitations("docs/a.md §2", docs)).toHaveLength(1); // only inside a code fence
    expect(brokenCitations("docs/a.md §1–3", docs)).toHaveLength(1);
    expect(brokenCitations("docs/a.md, §1, §2", docs)).toEqual([]); // the comma ends the citation
    expect(brokenCitations("docs/a.md §1, §4", docs)).toHaveLength(1);
    expect(brokenCitations("docs/a.md#one-two", docs)).toHaveLength(1);
    expect(brokenCitations("docs/a.md, \"Three\"", docs)).toHaveLength(1);
    expect(brokenCitations("docs/a.md \"The x part\" and docs/a.md \"two WORDS code\"", docs)).toEqual([]);
    expect(brokenCitations("docs/b.md", docs)).toHaveLength(1);
    expect(brokenCitations('join("docs/a.md", "x")', docs)).toEqual([]); // a string literal, not a title
  });

  test("links", () => {
    expect(brokenLinks("[a](../../x.md) [b](docs/domain.md#x) [c](https://x.org) [d](nope.md)", "README.md", REPO)).toEqual([
      "../../x.md: outside the repository",
      "nope.md: no such file",
    ]);
  });
});

describe("the repository cites only itself", () => {
  const files = repoFiles();
  const docs = docsPages();

  test("the docs pages the code cites are there", () => {
    expect(files.length).toBeGreaterThan(100);
    expect([...docs.keys()]).toContain("domain.md");
    expect([...docs.keys()]).toContain("architecture.md");
  });

  test("no file names a path outside the repository", () => {
    const problems = files.flatMap((f) => outsidePaths(readFileSync(join(REPO, f), "utf8")).map((p) => `${f}:${p}`));
    expect(problems).toEqual([]);
  });

  test("every docs/ citation names an existing page and section", () => {
    const problems = files.flatMap((f) => brokenCitations(readFileSync(join(REPO, f), "utf8"), docs).map((p) => `${f}:${p}`));
    expect(problems).toEqual([]);
  });

  test("every relative Markdown link stays inside the repository and names a file", () => {
    const problems = files
      .filter((f) => f.endsWith(".md"))
      .flatMap((f) => brokenLinks(readFileSync(join(REPO, f), "utf8"), f, REPO).map((p) => `${f}: ${p}`));
    expect(problems).toEqual([]);
  });
});
