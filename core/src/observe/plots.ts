/**
 * Plots of a training summary (`bun run plot <summary.json> [--out DIR]`, `bun run train --plots
 * DIR`): Vega-Lite specifications compiled by `vega-lite`, rendered to SVG by `vega`'s headless
 * View, and rasterised to PNG by `@resvg/resvg-js` (system fonts; DejaVu Sans preferred).
 *
 * Plots (file stem → content), from docs/summary.md's fields:
 * - `loss`: training loss per step (`losses`) and validation loss per evaluation (`eval_history`).
 * - `lr`: learning rate at each logged step (`history[].lr`).
 * - `tokens-per-second`: global training tokens/s per logged window (`history[].tokens_per_second`).
 * - `expert-load`: heatmap of routing choices per (layer, expert) row × logged step column
 *   (`history[].expert_counts`, each window's counts as a share of its layer's), dead experts
 *   (0 choices in the window) marked with a cross. Skipped for dense models.
 * - `expert-pairs`: heatmap of co-occurrence counts per MoE layer (`moe.expert_pairs`: tokens that
 *   chose both experts), one panel per layer, expert × expert. Skipped when the summary has none.
 * - `comm-share`: per logged step, the share of the step's wall time spent in collectives, stacked
 *   by op (`history[].comm_ms` scaled to `history[].comm_share`).
 */
import { Resvg } from "@resvg/resvg-js";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as vega from "vega";
import * as vl from "vega-lite";
import type { TrainSummary } from "../train/summary.ts";

/** A Vega-Lite specification (top-level). */
export type VegaLiteSpec = vl.TopLevelSpec;

const WIDTH = 560;
const HEIGHT = 260;
const FONT = "DejaVu Sans";
const CONFIG = { font: FONT, background: "white", axis: { labelFontSize: 11, titleFontSize: 12 }, title: { fontSize: 14 } };

/** The Vega-Lite specs of a summary's plots, by file stem (module comment). Plots without data
 * (no history, a dense model) are left out. */
export function plotSpecs(s: TrainSummary): Record<string, VegaLiteSpec> {
  const out: Record<string, VegaLiteSpec> = {};
  const start = s.start_step ?? 0;
  const train = s.losses.map((loss, i) => ({ step: start + i + 1, loss, series: "train loss" }));
  const val = (s.eval_history ?? []).map((e) => ({ step: e.step, loss: e.val_loss, series: "validation loss" }));
  if (train.length > 0) {
    out.loss = {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      title: "Loss",
      width: WIDTH,
      height: HEIGHT,
      config: CONFIG,
      layer: [
        { data: { values: train }, mark: { type: "line", strokeWidth: 1.5 }, encoding: { x: { field: "step", type: "quantitative", title: "step" }, y: { field: "loss", type: "quantitative", title: "loss", scale: { zero: false } }, color: { field: "series", type: "nominal", title: null, scale: { domain: ["train loss", "validation loss"] } } } },
        { data: { values: val }, mark: { type: "point", filled: true, size: 50 }, encoding: { x: { field: "step", type: "quantitative" }, y: { field: "loss", type: "quantitative" }, color: { field: "series", type: "nominal" } } },
      ],
    };
  }
  const hist = s.history ?? [];
  if (hist.length > 0) {
    const line = (title: string, field: string, yTitle: string): VegaLiteSpec => ({
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      title,
      width: WIDTH,
      height: HEIGHT,
      config: CONFIG,
      data: { values: hist.map((h) => ({ step: h.step, value: (h as unknown as Record<string, number>)[field] })) },
      mark: { type: "line", point: true },
      encoding: { x: { field: "step", type: "quantitative", title: "step" }, y: { field: "value", type: "quantitative", title: yTitle } },
    });
    // every step's lr where the summary has it (a warm-up is invisible at the logged steps alone)
    out.lr = (s.lrs ?? []).length > 0
      ? { ...line("Learning rate", "lr", "learning rate"), data: { values: s.lrs.map((lr, i) => ({ step: start + i + 1, value: lr })) }, mark: { type: "line" } }
      : line("Learning rate", "lr", "learning rate");
    out["tokens-per-second"] = line("Training throughput", "tokens_per_second", "tokens / s");
    const cells: { step: number; row: string; share: number; count: number; dead: boolean }[] = [];
    for (const h of hist) {
      (h.expert_counts ?? []).forEach((layer, l) => {
        const tot = layer.reduce((a, b) => a + b, 0);
        layer.forEach((c, e) => cells.push({ step: h.step, row: `layer ${l} · expert ${e}`, share: tot > 0 ? c / tot : 0, count: c, dead: c === 0 }));
      });
    }
    if (cells.length > 0) {
      const rows = [...new Set(cells.map((c) => c.row))];
      const enc = { x: { field: "step", type: "ordinal" as const, title: "step" }, y: { field: "row", type: "ordinal" as const, title: "layer · expert", sort: rows } };
      out["expert-load"] = {
        $schema: "https://vega.github.io/schema/vega-lite/v6.json",
        title: "Expert load (share of each layer's routing choices per logged window; × = dead)",
        width: Math.max(WIDTH, 14 * hist.length),
        height: Math.max(HEIGHT, 14 * rows.length),
        config: CONFIG,
        data: { values: cells },
        layer: [
          { mark: "rect", encoding: { ...enc, color: { field: "share", type: "quantitative", title: "share", scale: { scheme: "viridis" } } } },
          { transform: [{ filter: "datum.dead" }], mark: { type: "text", text: "×", color: "red", fontSize: 14, fontWeight: "bold" }, encoding: enc },
        ],
      };
    }
    const pairCells: { layer: string; a: number; b: number; count: number }[] = [];
    (s.moe?.expert_pairs ?? []).forEach((m, l) => m.forEach((row, a) => row.forEach((count, b) => pairCells.push({ layer: `layer ${l}`, a, b, count }))));
    if (pairCells.length > 0) {
      out["expert-pairs"] = {
        $schema: "https://vega.github.io/schema/vega-lite/v6.json",
        title: "Expert co-occurrence (tokens that chose both experts, over the run)",
        config: CONFIG,
        data: { values: pairCells },
        facet: { field: "layer", type: "nominal", title: null },
        columns: 4,
        spec: { width: 180, height: 180, mark: "rect", encoding: { x: { field: "a", type: "ordinal", title: "expert" }, y: { field: "b", type: "ordinal", title: "expert" }, color: { field: "count", type: "quantitative", title: "tokens", scale: { scheme: "viridis" } } } },
      };
    }
    const comm: { step: number; op: string; share: number }[] = [];
    for (const h of hist) {
      const total = Object.values(h.comm_ms).reduce((a, b) => a + b, 0);
      for (const [op, ms] of Object.entries(h.comm_ms)) comm.push({ step: h.step, op, share: total > 0 ? (h.comm_share * ms) / total : 0 });
    }
    out["comm-share"] = {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      title: "Communication share of the step time",
      width: WIDTH,
      height: HEIGHT,
      config: CONFIG,
      data: { values: comm },
      mark: "bar",
      encoding: {
        x: { field: "step", type: "ordinal", title: "step" },
        y: { field: "share", type: "quantitative", title: "share of step time", stack: "zero", axis: { format: "%" } },
        color: { field: "op", type: "nominal", title: "collective" },
      },
    };
  }
  return out;
}

/** SVG text of a Vega-Lite spec (vega-lite compile → vega View, no renderer). */
export async function renderSvg(spec: VegaLiteSpec): Promise<string> {
  const compiled = vl.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** PNG bytes of an SVG (resvg; 2× scale for legibility). */
export function svgToPng(svg: string): Uint8Array {
  const r = new Resvg(svg, { fitTo: { mode: "zoom", value: 2 }, font: { loadSystemFonts: true, defaultFontFamily: FONT }, background: "white" });
  return r.render().asPng();
}

/**
 * Write every plot of `summary` into `dir` as `<stem>.svg` and `<stem>.png`.
 * @returns the files written. @throws Error naming `dir` when it cannot be created.
 */
export async function writePlots(summary: TrainSummary, dir: string): Promise<string[]> {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (e) {
    throw new Error(`plots: cannot create ${dir}: ${(e as Error).message}`);
  }
  const files: string[] = [];
  for (const [stem, spec] of Object.entries(plotSpecs(summary))) {
    const svg = await renderSvg(spec);
    writeFileSync(join(dir, `${stem}.svg`), svg);
    writeFileSync(join(dir, `${stem}.png`), svgToPng(svg));
    files.push(join(dir, `${stem}.svg`), join(dir, `${stem}.png`));
  }
  return files;
}
