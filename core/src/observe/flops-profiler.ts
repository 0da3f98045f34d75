/**
 * DeepSpeed's FLOPs profiler (`flops_profiler`: enabled, profile_step, module_depth, top_modules,
 * detailed, output_file; deepspeed/profiling/flops_profiler): during the training step
 * `profile_step` it counts the FLOPs of every matmul, grouped matmul and attention kernel
 * (observed-backend.ts gives the formulas), charges the forward ones to the model unit running
 * them (a unit is the module here: `embed`, `layers.3.attn`, `layers.3.experts.1`, `lm_head`, …),
 * times each unit's forward, and reports per module: parameters, forward FLOPs, forward latency
 * and achieved FLOP/s; for the model: forward FLOPs, the step's counted FLOPs (forward, backward
 * and recomputation), the step time, achieved FLOP/s and an MFU-style figure against the backend's
 * matmul peak measured once on the device ({@link measurePeakFlops}).
 *
 * Modules form a tree by name: a unit name's parts (a number joins the part before it, so
 * `layers.3.experts.1` is `layers.3` › `experts.1`) give its ancestors; a parent's figures are the
 * sums of its children's. Depth 0 is the model; `module_depth` −1 shows every depth.
 * Units: FLOPs, seconds, FLOP/s.
 */
import type { Backend } from "@zeromoe/kernels";
import type { FlopsProfilerConfig } from "../config/types.ts";
import type { FlopSink } from "./observed-backend.ts";

/** Figures of one module (a unit or a group of units). */
export interface ModuleProfile {
  name: string;
  depth: number;
  params: number;
  /** Forward FLOPs of the profiled step on this rank (all micro-batches). */
  flops: number;
  /** Forward wall time, seconds (units entered inside it excluded). */
  latency: number;
  /** flops / latency (0 when latency is 0). */
  flops_per_second: number;
}

/** The profile of one step (what the summary's `flops_profile` holds). */
export interface FlopsProfile {
  step: number;
  /** Forward FLOPs of the whole model on this rank. */
  forward_flops: number;
  /** Every counted FLOP of the step on this rank (forward, backward, recomputation). */
  step_flops: number;
  /** Wall time of the step, seconds. */
  step_seconds: number;
  /** step_flops / step_seconds. */
  achieved_flops_per_second: number;
  /** Backend matmul peak measured on this device, FLOP/s. */
  peak_flops_per_second: number;
  /** achieved / peak. */
  mfu: number;
  /** Every module at every depth, depth-first in model order. */
  modules: ModuleProfile[];
}

/** The parts of a unit name (module comment). */
export function modulePath(unitName: string): string[] {
  const parts: string[] = [];
  for (const p of unitName.split(".")) {
    if (/^\d+$/.test(p) && parts.length > 0) parts[parts.length - 1] += `.${p}`;
    else parts.push(p);
  }
  return parts;
}

/**
 * Counts one step (module comment). Feed it FLOPs (as the observed backend's `flops` sink) and the
 * units' forward enter/leave; the engine's observer does both during `profile_step` only.
 */
export class FlopsCounter implements FlopSink {
  private readonly perUnit = new Map<string, { flops: number; latency: number }>();
  private readonly stack: string[] = [];
  private last = 0;
  /** Every counted FLOP (forward and backward). */
  stepFlops = 0;
  /** True while the model's forward runs (set by the observer). */
  inForward = false;

  constructor(private readonly now: () => number = () => performance.now() / 1000) {}

  add(flops: number): void {
    this.stepFlops += flops;
    const u = this.stack[this.stack.length - 1];
    if (this.inForward && u !== undefined) this.entry(u).flops += flops;
  }

  private entry(u: string): { flops: number; latency: number } {
    let e = this.perUnit.get(u);
    if (!e) this.perUnit.set(u, (e = { flops: 0, latency: 0 }));
    return e;
  }

  private charge(): void {
    const t = this.now();
    const u = this.stack[this.stack.length - 1];
    if (u !== undefined) this.entry(u).latency += t - this.last;
    this.last = t;
  }

  /** A unit's forward starts (after its gather). */
  enter(unit: string): void {
    this.charge();
    this.stack.push(unit);
  }

  /** A unit's forward ends (before its release). */
  leave(unit: string): void {
    this.charge();
    const i = this.stack.lastIndexOf(unit);
    if (i >= 0) this.stack.splice(i, 1);
  }

  /** Per-unit figures so far. */
  units(): ReadonlyMap<string, { flops: number; latency: number }> {
    return this.perUnit;
  }
}

/**
 * The module tree of a profiled step.
 * @param units every unit of the model in model order with its parameter count (numel).
 */
export function buildProfile(
  step: number,
  units: readonly { name: string; numel: number }[],
  counter: FlopsCounter,
  stepSeconds: number,
  peak: number,
): FlopsProfile {
  const nodes = new Map<string, ModuleProfile>();
  const order: string[] = [];
  const node = (name: string, depth: number): ModuleProfile => {
    let n = nodes.get(name);
    if (!n) {
      nodes.set(name, (n = { name, depth, params: 0, flops: 0, latency: 0, flops_per_second: 0 }));
      order.push(name);
    }
    return n;
  };
  const root = node("model", 0);
  const got = counter.units();
  for (const u of units) {
    const f = got.get(u.name) ?? { flops: 0, latency: 0 };
    const path = modulePath(u.name);
    const chain = [root, ...path.map((_, i) => node(path.slice(0, i + 1).join("."), i + 1))];
    for (const n of chain) {
      n.params += u.numel;
      n.flops += f.flops;
      n.latency += f.latency;
    }
  }
  for (const n of nodes.values()) n.flops_per_second = n.latency > 0 ? n.flops / n.latency : 0;
  const achieved = stepSeconds > 0 ? counter.stepFlops / stepSeconds : 0;
  // depth-first in model order: sort by the first unit's position (insertion order) within parents
  const modules = depthFirst(order.map((k) => nodes.get(k)!));
  return {
    step,
    forward_flops: root.flops,
    step_flops: counter.stepFlops,
    step_seconds: stepSeconds,
    achieved_flops_per_second: achieved,
    peak_flops_per_second: peak,
    mfu: peak > 0 ? achieved / peak : 0,
    modules,
  };
}

function depthFirst(ms: ModuleProfile[]): ModuleProfile[] {
  const kids = new Map<string, ModuleProfile[]>();
  for (const m of ms) {
    if (m.depth === 0) continue;
    const i = m.name.length - modulePath(m.name).pop()!.length - 1;
    const parent = i > 0 ? m.name.slice(0, i) : "model";
    (kids.get(parent) ?? kids.set(parent, []).get(parent)!).push(m);
  }
  const out: ModuleProfile[] = [];
  const walk = (m: ModuleProfile): void => {
    out.push(m);
    for (const k of kids.get(m.name) ?? []) walk(k);
  };
  walk(ms.find((m) => m.depth === 0)!);
  return out;
}

/** "1.23 GFLOPs"-style numbers with SI prefixes. */
export function si(v: number, unit: string): string {
  const p = ["", "K", "M", "G", "T", "P"];
  let i = 0;
  let x = v;
  while (Math.abs(x) >= 1000 && i < p.length - 1) {
    x /= 1000;
    i++;
  }
  return `${x.toFixed(2)} ${p[i]}${unit}`;
}

/** Seconds as "12.34 ms". */
function ms(s: number): string {
  return `${(s * 1000).toFixed(2)} ms`;
}

/**
 * The report DeepSpeed's profiler prints (summary, aggregated top modules per depth, detailed
 * tree), limited by `module_depth`, `top_modules` and `detailed`.
 */
export function formatProfile(p: FlopsProfile, cfg: FlopsProfilerConfig, facts: { worldSize: number; rank: number; backend: string }): string[] {
  const maxDepth = cfg.module_depth < 0 ? Infinity : cfg.module_depth;
  const out = [
    "-------------------------- ZeroMoE Flops Profiler --------------------------",
    `Profile Summary at step ${p.step} (rank ${facts.rank}, ${facts.backend}):`,
    `world size:                             ${facts.worldSize}`,
    `params of the model:                    ${si(p.modules[0]?.params ?? 0, "")}`,
    `fwd FLOPs on this rank:                 ${si(p.forward_flops, "FLOPs")} (matmul and attention kernels)`,
    `fwd latency:                            ${ms(p.modules[0]?.latency ?? 0)}`,
    `fwd FLOP/s:                             ${si(p.modules[0]?.flops_per_second ?? 0, "FLOP/s")}`,
    `step FLOPs counted (fwd+bwd+recompute): ${si(p.step_flops, "FLOPs")}`,
    `step latency:                           ${ms(p.step_seconds)}`,
    `achieved FLOP/s (step):                 ${si(p.achieved_flops_per_second, "FLOP/s")}`,
    `peak FLOP/s (matmul, measured):         ${si(p.peak_flops_per_second, "FLOP/s")}`,
    `MFU (achieved / peak):                  ${(p.mfu * 100).toFixed(1)} %`,
    "",
    "----------------------------- Aggregated Profile -----------------------------",
    `Top ${cfg.top_modules} modules in terms of params, FLOPs or fwd latency at different model depths:`,
  ];
  const depths = [...new Set(p.modules.map((m) => m.depth))].filter((d) => d >= 1 && d <= maxDepth).sort((a, b) => a - b);
  for (const d of depths) {
    const at = p.modules.filter((m) => m.depth === d);
    const top = (key: "params" | "flops" | "latency", f: (v: number) => string): string =>
      [...at].sort((a, b) => b[key] - a[key]).slice(0, cfg.top_modules).map((m) => `${m.name}: ${f(m[key])}`).join(", ");
    out.push(`depth ${d}:`, `    params      - {${top("params", (v) => si(v, ""))}}`, `    FLOPs       - {${top("flops", (v) => si(v, "FLOPs"))}}`, `    fwd latency - {${top("latency", ms)}}`);
  }
  if (cfg.detailed) {
    out.push("", "------------------------------ Detailed Profile ------------------------------", "module: params, fwd FLOPs (% of model), fwd latency (% of model), fwd FLOP/s");
    const root = p.modules[0]!;
    for (const m of p.modules) {
      if (m.depth > maxDepth) continue;
      const pf = root.flops > 0 ? ((100 * m.flops) / root.flops).toFixed(2) : "0.00";
      const pl = root.latency > 0 ? ((100 * m.latency) / root.latency).toFixed(2) : "0.00";
      out.push(`${"  ".repeat(m.depth)}${m.name}: ${si(m.params, "")}, ${si(m.flops, "FLOPs")} (${pf} %), ${ms(m.latency)} (${pl} %), ${si(m.flops_per_second, "FLOP/s")}`);
    }
  }
  out.push("------------------------------------------------------------------------------");
  return out;
}

/**
 * The backend's matmul peak, FLOP/s: the best of `reps` square f32 matmuls of side n (256 on the
 * cpu backend, 4096 on a device), each awaited to completion. Measured once per profiled run.
 */
export async function measurePeakFlops(be: Backend, reps = 3): Promise<number> {
  const n = be.info.name === "cpu" ? 256 : 4096;
  const a = be.alloc("f32", n * n, "other");
  const b = be.alloc("f32", n * n, "other");
  const c = be.alloc("f32", n * n, "other");
  try {
    const src = new Float32Array(n * n);
    for (let i = 0; i < src.length; i++) src[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
    be.write({ buf: a, off: 0 }, src);
    be.write({ buf: b, off: 0 }, src);
    const spec = { M: n, N: n, K: n };
    be.matmul({ buf: a, off: 0 }, { buf: b, off: 0 }, { buf: c, off: 0 }, spec); // warm-up (pipeline compile)
    await be.read({ buf: c, off: 0 }, 1);
    let best = Infinity;
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      be.matmul({ buf: a, off: 0 }, { buf: b, off: 0 }, { buf: c, off: 0 }, spec);
      await be.read({ buf: c, off: 0 }, 1);
      best = Math.min(best, (performance.now() - t0) / 1000);
    }
    return (2 * n * n * n) / best;
  } finally {
    be.free(a);
    be.free(b);
    be.free(c);
  }
}
