/**
 * Plots from a recorded summary (fixtures/recorded-summary.json: 12 steps, world 2, ZeRO-3 + MoE
 * ep 2, logged every 4 steps, evaluations at 6 and 12; one expert made dead in the last window):
 * every plot renders as SVG with its axis titles and the expected number of marks, and as a PNG;
 * the plot CLI writes them and exits 2 on a bad file.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { plotSpecs, renderSvg, svgToPng } from "../../src/observe/plots.ts";
import { main as plotMain } from "../../src/cli/plot.ts";

const FIXTURE = new URL("./fixtures/recorded-summary.json", import.meta.url).pathname;
const summary = JSON.parse(readFileSync(FIXTURE, "utf8"));

/** Items of the mark group whose class is `mark-<type>` (vega's SVG: one <path>/<text> per item). */
function markCount(svg: string, type: string, tag: "path" | "text" = "path"): number {
  let n = 0;
  const re = new RegExp(`<g class="mark-${type} role-mark[^"]*"[^>]*>`, "g");
  for (const m of svg.matchAll(re)) {
    // the group ends at the first </g> that closes it (items are not nested groups)
    const body = svg.slice(m.index! + m[0].length, svg.indexOf("</g>", m.index!));
    n += (body.match(new RegExp(`<${tag}[ >]`, "g")) ?? []).length;
  }
  return n;
}

/** Axis titles: the text of vega's role-axis-title groups. */
function axisTitles(svg: string): string[] {
  return [...svg.matchAll(/<g class="mark-text role-axis-title"[^>]*>\s*<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);
}

const specs = plotSpecs(summary);

describe("plots of a recorded summary", () => {
  test("every plot is there", () => {
    expect(Object.keys(specs).sort()).toEqual(["comm-share", "expert-load", "loss", "lr", "tokens-per-second"]);
  });

  test("expert-pairs: with moe.expert_pairs, one rect per (layer, expert, expert), in SVG and PNG", async () => {
    const E = summary.moe.expert_counts[0].length;
    const pairs = summary.moe.expert_counts.map((_: unknown, l: number) => Array.from({ length: E }, (_x, a) => Array.from({ length: E }, (_y, b) => (a === b ? 0 : 1 + ((a + b + l) % 3)))));
    const sp = plotSpecs({ ...summary, moe: { ...summary.moe, expert_pairs: pairs } });
    const svg = await renderSvg(sp["expert-pairs"]!);
    expect(markCount(svg, "rect")).toBe(pairs.length * E * E);
    expect(axisTitles(svg)).toEqual(expect.arrayContaining(["expert"]));
    expect(svgToPng(svg).length).toBeGreaterThan(100);
  });

  test("loss: a line over the 12 steps and the 2 validation points; axis titles step/loss", async () => {
    const svg = await renderSvg(specs.loss!);
    expect(axisTitles(svg)).toEqual(expect.arrayContaining(["step", "loss"]));
    expect(markCount(svg, "line")).toBe(1);
    expect(markCount(svg, "symbol")).toBe(summary.eval_history.length);
    expect(svg).toContain("validation loss");
  });

  test("lr and tokens/s: one point per logged step", async () => {
    for (const [k, title] of [["lr", "learning rate"], ["tokens-per-second", "tokens / s"]] as const) {
      const svg = await renderSvg(specs[k]!);
      expect(axisTitles(svg)).toEqual(expect.arrayContaining(["step", title]));
      expect(markCount(svg, "symbol")).toBe(summary.history.length);
    }
  });

  test("expert-load: one cell per (layer, expert, logged step), one cross per dead cell", async () => {
    const svg = await renderSvg(specs["expert-load"]!);
    expect(axisTitles(svg)).toEqual(expect.arrayContaining(["step", "layer · expert"]));
    const L = summary.moe.expert_counts.length;
    const E = summary.moe.expert_counts[0].length;
    expect(markCount(svg, "rect")).toBe(L * E * summary.history.length);
    const dead = summary.history.flatMap((h: { expert_counts: number[][] }) => h.expert_counts.flat()).filter((c: number) => c === 0).length;
    expect(dead).toBe(1);
    expect(markCount(svg, "text", "text")).toBe(dead);
  });

  test("comm-share: one bar segment per (logged step, collective)", async () => {
    const svg = await renderSvg(specs["comm-share"]!);
    expect(axisTitles(svg)).toEqual(expect.arrayContaining(["step", "share of step time"]));
    const segments = summary.history.reduce((a: number, h: { comm_ms: object }) => a + Object.keys(h.comm_ms).length, 0);
    expect(markCount(svg, "rect")).toBe(segments);
  });

  test("PNG: a valid image of the SVG's aspect", async () => {
    const png = svgToPng(await renderSvg(specs.loss!));
    expect([...png.subarray(1, 4)].map((c) => String.fromCharCode(c)).join("")).toBe("PNG");
    const dv = new DataView(png.buffer, png.byteOffset);
    expect(dv.getUint32(16)).toBeGreaterThan(800); // width at 2×
    expect(dv.getUint32(20)).toBeGreaterThan(300);
  });

  test("bun run plot writes SVG and PNG per plot; a bad file exits 2", async () => {
    const dir = mkdtempSync(join(tmpdir(), "zeromoe-plot-"));
    expect(await plotMain([FIXTURE, "--out", dir])).toBe(0);
    expect(readdirSync(dir).length).toBe(10);
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ steps: 1 }));
    expect(await plotMain([bad])).toBe(2);
    expect(await plotMain([])).toBe(2);
  });
});
