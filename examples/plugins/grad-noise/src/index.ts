/**
 * zeromoe-plugin-grad-noise — an example third-party ZeroMoE plugin (docs/plugins.md).
 *
 * It WRAPS the `reduce` hook (so it composes with zero1/zero2/zero3 or core's data-parallel
 * default, whoever owns the hook) and measures, per optimizer step:
 *
 * - per unit, the L2 norm of the averaged gradient the optimizer will use, |G_big|;
 * - per unit, the mean squared norm of the single micro-batch gradients before reduction,
 *   |G_small|² (mean over all micro-batches of all ranks);
 * - the "simple" gradient noise scale B_simple = tr(Σ)/|G|² of McCandlish et al., "An Empirical
 *   Model of Large-Batch Training" (2018), App. A.1, from the unbiased estimates
 *   |G|² ≈ (B_big·|G_big|² − B_small·|G_small|²)/(B_big − B_small) and
 *   tr(Σ) ≈ (|G_small|² − |G_big|²)/(1/B_small − 1/B_big), with B_small = micro-batch size and
 *   B_big = global batch (sequences). B_simple estimates the batch size beyond which larger batches
 *   stop paying off. It needs B_big > B_small (more than one micro-batch per step in total).
 *
 * How (through the plugin context of @zeromoe/core/plugin only): `gradReady(unit, ctx)` reads
 * Σ g² of the unit's fresh micro-batch gradient (`unit.microGrad()`, before the wrapped
 * implementation consumes it), then calls the wrapped hook. `finish(ctx)` calls the wrapped hook
 * (gradients are then reduced and owned), adds Σ g² of the owned gradient region
 * (`unit.ownedGrad()`, what the optimizer updates) of every unit this rank counts
 * (`unit.countsGradient`: core's rule, so every element counts once over all ranks), and runs ONE
 * f64 all_reduce over the world of [Σ small, count, Σ big] per unit — every rank calls `finish`
 * once per step, so the collective matches on all ranks. Gradients are summed over ranks
 * and micro-batches when `finish` returns (engine contract), so |G_big|² = Σ / (accum · world)².
 * Under fp16 loss scaling all norms carry the loss scale; B_simple does not depend on it.
 *
 * Nothing is changed: training with the plugin is bit-identical to training without it (tested).
 * Load it from a job: `"plugins": ["./examples/plugins/grad-noise/src/index.ts"]` (a path, resolved
 * from the working directory) or by package name once installed.
 */
import type { EngineHooks, HookContext, Plugin, ReduceHook, SetupContext, UnitHandle } from "@zeromoe/core/plugin";

/** A device buffer (the type of a unit's gradient buffer). */
type Buf = NonNullable<ReturnType<UnitHandle["microGrad"]>>;

/** Statistics of one optimizer step (identical on every rank). */
export interface GradNoiseStats {
  /** 1-based count of `finish` calls (optimizer steps, skipped ones included). */
  step: number;
  /** Σ over units of the mean squared micro-batch gradient norm. */
  smallSq: number;
  /** Squared norm of the averaged gradient. */
  bigSq: number;
  /** Micro-batch size and global batch, in sequences. */
  bSmall: number;
  bBig: number;
  /** B_simple (NaN when bBig ≤ bSmall or the estimate of |G|² is not positive). */
  noiseScale: number;
  /** Per unit (model order): name, |G_big| and sqrt(mean |g_small|²). */
  units: { name: string; norm: number; microNorm: number }[];
}

/** Options of {@link createGradNoisePlugin}. */
export interface GradNoiseOptions {
  /** Log every this many steps on rank 0 (0 = never). Default 1. */
  every?: number;
  /** Include per-unit norms in the log line. Default true. */
  perUnit?: boolean;
  /** Called with every step's statistics on every rank. */
  onStats?: (s: GradNoiseStats, ctx: HookContext) => void;
}

type Hooks = EngineHooks & Record<string, unknown>;

/** Σ x² of `n` elements of `buf` at `off` (f32/bf16/f16), computed on the device, read back. */
async function sumSquares(ctx: HookContext, buf: Buf, off: number, n: number): Promise<number> {
  if (n <= 0) return 0;
  const out = ctx.be.alloc("f32", 1, "other");
  ctx.be.sumSquares({ buf, off }, { buf: out, off: 0 }, n);
  const v = (await ctx.be.read({ buf: out, off: 0 }, 1))[0]!;
  ctx.be.free(out);
  return v;
}

/** Σ g² of the reduced gradient region this rank owns for `unit`, or 0 when another rank counts it. */
async function ownedSumSquares(ctx: HookContext, unit: UnitHandle): Promise<number> {
  if (!unit.countsGradient) return 0;
  const g = unit.ownedGrad();
  return sumSquares(ctx, g.view.buf, g.view.off, g.n);
}

/** B_simple from the two squared norms (see the module comment); NaN where undefined. */
export function noiseScale(smallSq: number, bigSq: number, bSmall: number, bBig: number): number {
  if (!(bBig > bSmall)) return Number.NaN;
  const g2 = (bBig * bigSq - bSmall * smallSq) / (bBig - bSmall);
  const trace = (smallSq - bigSq) / (1 / bSmall - 1 / bBig);
  return g2 > 0 ? trace / g2 : Number.NaN;
}

/** A grad-noise plugin instance (each engine needs its own: state lives in `setup`). */
export function createGradNoisePlugin(opts: GradNoiseOptions = {}): Plugin<Hooks, SetupContext> {
  const every = opts.every ?? 1;
  const perUnit = opts.perUnit ?? true;
  return {
    name: "grad-noise",
    setup(ctx) {
      const units = ctx.modelUnits; // every unit of the model, held here or not (same order on all ranks)
      const index = new Map<string, number>(units.map((u, i) => [u.name, i]));
      let small = new Float64Array(units.length);
      let count = new Float64Array(units.length);
      let step = 0;
      ctx.wrap("reduce", (prev: ReduceHook): ReduceHook => ({
        async gradReady(unit, hc) {
          const i = index.get(unit.name);
          if (i === undefined) throw new Error(`grad-noise: unit ${unit.name} is not in the model's unit list`);
          const g = unit.microGrad();
          if (g) {
            small[i] += await sumSquares(hc, g, 0, unit.numel);
            count[i] += 1;
          }
          await prev.gradReady(unit, hc);
        },
        async finish(hc) {
          await prev.finish(hc);
          step++;
          const u = units.length;
          const buf = new Float64Array(3 * u);
          for (let i = 0; i < u; i++) {
            buf[i] = small[i]!;
            buf[u + i] = count[i]!;
            buf[2 * u + i] = hc.holds(units[i]!) ? await ownedSumSquares(hc, hc.unit(units[i]!)) : 0;
          }
          if (hc.worldSize > 1) await hc.comm.allReduce(buf);
          small = new Float64Array(u);
          count = new Float64Array(u);
          const div = hc.micro.count * hc.worldSize;
          const bSmall = hc.config.train_micro_batch_size_per_gpu;
          const bBig = bSmall * div;
          const rows: GradNoiseStats["units"] = [];
          let smallSq = 0;
          let bigSq = 0;
          for (let i = 0; i < u; i++) {
            const ms = buf[u + i]! > 0 ? buf[i]! / buf[u + i]! : 0;
            const bs = buf[2 * u + i]! / (div * div);
            smallSq += ms;
            bigSq += bs;
            rows.push({ name: units[i]!.name, norm: Math.sqrt(bs), microNorm: Math.sqrt(ms) });
          }
          const stats: GradNoiseStats = { step, smallSq, bigSq, bSmall, bBig, noiseScale: noiseScale(smallSq, bigSq, bSmall, bBig), units: rows };
          opts.onStats?.(stats, hc);
          if (every > 0 && step % every === 0 && hc.rank === 0) {
            let line = `grad-noise step ${step}: |G|=${Math.sqrt(bigSq).toPrecision(4)} |g_micro|=${Math.sqrt(smallSq).toPrecision(4)} B_simple=${stats.noiseScale.toPrecision(4)} (B_small ${bSmall}, B_big ${bBig})`;
            if (perUnit) line += " " + rows.map((r) => `${r.name}=${r.norm.toPrecision(3)}`).join(" ");
            hc.log(line);
          }
        },
      }));
    },
  };
}

/** The plugin as loaded from a job's `plugins` list: logs every step on rank 0. */
const gradNoise: Plugin<Hooks, SetupContext> = createGradNoisePlugin();
export default gradNoise;
