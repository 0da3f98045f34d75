/**
 * Parameter units — the sharding granules of ZeroMoE (like FSDP's wrapped modules;
 * docs/architecture.md "Units: the sharding granule").
 *
 * ## Layout
 * A model's parameters are grouped into units: `embed` (model.embed_tokens), one `layer` unit per
 * decoder layer (attention, norms, dense MLP or MoE router), one `expert` unit per (layer, expert)
 * of a Mixtral model, and `head` (model.norm + lm_head). Each unit stores its parameters in ONE flat
 * buffer `unit.data` of the unit's dtype (f32, bf16 or f16), tagged `param`; each {@link Parameter}
 * is `(offset, shape)` into it, in declaration order, contiguous. Gradients mirror this in a flat
 * buffer `unit.grad` of the same dtype and length, tagged `grad`.
 *
 * ## Lifetime of the flat buffers (what an engine/plugin may do)
 * - `unit.data` may be replaced or set to `null` at any time outside the unit's forward/backward
 *   region (ZeRO-3 frees it after use and gathers it again). Parameters resolve their data through
 *   the unit *at use time*, so nothing captured during forward goes stale. A buffer longer than
 *   `unit.numel` is accepted (padded shards); only the first `numel` elements are read.
 * - `unit.grad` is allocated zeroed on first use. Contributions are *added* (micro-batch
 *   accumulation); `zeroGrad()` zeroes it. An engine may take it (set `null`) after `gradReady`.
 * - 16-bit units (mixed precision): compute always runs in f32. At gather time the unit makes an f32
 *   working copy `unit.work` (tag `activation`: a compute temporary of the region, not a gathered
 *   parameter — so `gathered` counts parameter-dtype bytes, as ZeRO-3's limits are stated) from `data`; gradients accumulate into an f32
 *   `unit.workGrad` (tag `grad`); at `gradReady` time the 16-bit `unit.grad` is produced by casting
 *   `workGrad` (round to nearest even). `zeroGrad()` clears both. `work` is dropped after each
 *   region.
 * - A 16-bit unit made with `workingCopy: false` (the experts of core/src/models: their parameters
 *   are read only by nn/moe/grouped-weights.ts, which converts the 16-bit storage itself while it
 *   stacks the weights) has neither: no `work` (its parameters' `tensor.view` throws; ops read
 *   {@link Parameter.readView}), no `workGrad` — gradient contributions are added straight into
 *   the 16-bit `grad` ({@link Parameter.gradSinkView}), each contribution rounded once (one per
 *   micro-batch in a training step, so the bits equal the working-copy path's) — or, when the
 *   engine sets `gradInto` (its reduce hook only adds micro-batch gradients into the unit's
 *   accumulator: core's data parallelism, ZeRO-1), straight into that accumulator, with no
 *   micro-batch gradient at all. This keeps a MoE layer's experts at 2 bytes per element in
 *   their region (none with `gradInto`) instead of 2 + 4 + 4.
 *
 * ## Hooks ({@link UnitHooks}; defaults are no-ops = everything resident, plain data parallel)
 * - `gather(unit, "fwd")` before a unit's forward region, `release(unit, "fwd")` after it;
 * - `gather(unit, "bwd")` when the backward sweep enters the unit's region (first op of the region
 *   in reverse), then `gradReady(unit)` once all of its gradients are complete, then
 *   `release(unit, "bwd")`.
 * Hooks may be async; forward and backward await them in unit order. Every unit the forward entered
 * fires its backward hooks in the same order on every rank (even an expert that received no
 * tokens), so collectives inside hooks stay matched. Units are entered in a fixed order:
 * embed, layers.0 (and its experts 0..E−1, nested inside the layer), layers.1, …, head. A model with
 * `tie_word_embeddings` re-enters `embed` inside the head region (lm_head reads its weight).
 */
import type { Backend, Buf, DType, View } from "@zeromoe/kernels";
import type { TapeUnit } from "../tensor/tape.ts";
import { markUnit } from "../tensor/tape.ts";
import { Tensor, fmtShape, numelOf, type ParamSource } from "../tensor/tensor.ts";

/** Kind of unit; expert units are partitioned over the expert-data-parallel group (docs/domain.md §4). */
export type UnitKind = "embed" | "layer" | "expert" | "head";

/** Phase a gather/release belongs to. */
export type Phase = "fwd" | "bwd";

/**
 * The unit-level hooks an engine installs: gather/release, and the reduce trigger
 * (docs/architecture.md "The six hooks").
 */
export interface UnitHooks {
  /** Make `unit.data` resident (full parameters) before its forward or backward region. */
  gather(unit: Unit, phase: Phase): void | PromiseLike<void>;
  /** The region is over; the engine may free `unit.data`. */
  release(unit: Unit, phase: Phase): void | Promise<void>;
  /** All gradients of `unit` for this backward are in `unit.grad` (e.g. start its reduce). */
  gradReady(unit: Unit): void | Promise<void>;
}

/** Hooks that do nothing (all parameters resident; gradients stay local). */
export const NO_OP_HOOKS: UnitHooks = {
  gather: () => {},
  release: () => {},
  gradReady: () => {},
};

/** How a parameter is initialised (Hugging Face `_init_weights`): normal(0, std), ones, zeros.
 * A normal parameter with a `window` is the block rows [r0, r0 + shape[0]) × columns
 * [c0, c0 + shape[1]) of a full [rows, cols] matrix of the same name, and gets that block of the full
 * matrix's values (an expert's tensor-parallel slice, plugins/moe/src/expert-tp.ts; nn/init.ts). */
export type ParamInit = { kind: "normal"; std: number; window?: ParamWindow } | { kind: "ones" } | { kind: "zeros" };

/** Where a 2-d parameter sits in the full matrix it is a block of (see {@link ParamInit}). */
export interface ParamWindow {
  /** Columns of the full matrix. */
  fullCols: number;
  /** First row and first column of the block in the full matrix. */
  r0: number;
  c0: number;
  /** Name of the full parameter, whose Philox stream the block's values come from (default: the
   * parameter's own name). */
  key?: string;
}

/** Declaration of one parameter of a unit. */
export interface ParamSpec {
  /** Hugging Face name, e.g. `model.layers.0.mlp.up_proj.weight`. */
  name: string;
  /** HF shape (nn.Linear weight is [out, in]). */
  shape: number[];
  init: ParamInit;
}

/** A parameter: a named (offset, shape) region of its unit's flat buffer. */
export class Parameter implements ParamSource {
  readonly name: string;
  readonly shape: readonly number[];
  readonly numel: number;
  /** Element offset into the unit's flat buffers. */
  readonly offset: number;
  readonly init: ParamInit;
  readonly unit: Unit;
  /** The tensor ops use; its data resolves through the unit on each access. */
  readonly tensor: Tensor;

  constructor(unit: Unit, spec: ParamSpec, offset: number) {
    this.unit = unit;
    this.name = spec.name;
    this.shape = Object.freeze([...spec.shape]);
    this.numel = numelOf(spec.shape);
    this.offset = offset;
    this.init = spec.init;
    this.tensor = new Tensor(unit.be, spec.shape, "f32", { param: this });
  }

  /** Whether this parameter gets gradients (its unit's `trainable` flag). */
  get trainable(): boolean {
    return this.unit.trainable;
  }

  /** f32 compute view. @throws if the unit's data is not resident. */
  dataView(): View {
    return { buf: this.unit.computeBuffer(this.name), off: this.offset };
  }

  /** f32 gradient accumulator view (allocated zeroed on first use). @throws for a unit without a
   * working copy (use {@link gradSinkView}). */
  gradView(): View {
    return { buf: this.unit.computeGradBuffer(), off: this.offset };
  }

  /** The parameter's values for an op that converts 16-bit storage itself: the f32 compute view
   * when the unit has one (an f32 unit, or a 16-bit unit's working copy), else the unit's 16-bit
   * `data` (dtype bf16/f16, `numel` elements from the view's offset).
   * @throws naming the parameter and unit when the unit is not resident. */
  readView(): View {
    const u = this.unit;
    if (u.dtype === "f32" || u.work) return this.dataView();
    if (!u.data) throw new Error(`parameter ${this.name} of unit ${u.name} used while the unit is not gathered (unit.data is null)`);
    return { buf: u.data, off: this.offset };
  }

  /** Where an op that converts 16-bit values itself adds this parameter's gradient: the f32
   * accumulator when the unit has one (`grad` of an f32 unit, `workGrad` of a 16-bit unit with a
   * working copy), else the engine's accumulator `gradInto` when set, else the unit's 16-bit
   * `grad` (allocated zeroed on first use); the op reads it, adds its contribution in f32 and
   * writes it back rounded to nearest even. */
  gradSinkView(): View {
    const u = this.unit;
    if (u.workingCopy || u.dtype === "f32") return this.gradView();
    if (u.gradInto) return { buf: u.gradInto, off: this.offset };
    if (!u.grad) u.grad = u.be.alloc(u.dtype, Math.max(u.numel, 1), "grad");
    return { buf: u.grad, off: this.offset };
  }
}

/** Options of a {@link Unit}. */
export interface UnitOptions {
  name: string;
  kind: UnitKind;
  /** Storage dtype of parameters and gradients: f32, or bf16/f16 for mixed precision. */
  dtype?: DType;
  params: ParamSpec[];
  /** Decoder layer index (layer and expert units). */
  layer?: number;
  /** Expert index within its layer (expert units). */
  expert?: number;
  /** Allocate `data` now (default true). With false, `data` stays null until an engine provides it. */
  allocate?: boolean;
  /** 16-bit units: make the f32 working copy `work` and gradient accumulator `workGrad` (default
   * true). false for a unit whose parameters only ops reading {@link Parameter.readView} and
   * writing {@link Parameter.gradSinkView} use (see the module comment). Ignored for f32 units. */
  workingCopy?: boolean;
}

/** A unit (see the module comment). */
export class Unit implements TapeUnit {
  readonly be: Backend;
  readonly name: string;
  readonly kind: UnitKind;
  readonly dtype: DType;
  readonly layer: number | undefined;
  readonly expert: number | undefined;
  readonly params: readonly Parameter[];
  /** Sum of the parameters' element counts (the flat buffers' logical length). */
  readonly numel: number;
  /** Whether gradients are produced for this unit. */
  trainable = true;
  /** Whether a 16-bit unit computes through an f32 working copy (UnitOptions.workingCopy). */
  readonly workingCopy: boolean;
  /** Flat parameter buffer (dtype `dtype`, ≥ numel elements) or null while released. */
  data: Buf | null = null;
  /** Flat gradient buffer (dtype `dtype`) or null until the first backward. */
  grad: Buf | null = null;
  /** f32 working copy of `data` for 16-bit units (null when not materialised). */
  work: Buf | null = null;
  /** f32 gradient accumulator for 16-bit units. */
  workGrad: Buf | null = null;
  /** For a 16-bit unit without a working copy: an accumulator the engine owns (the unit's dtype,
   * ≥ numel elements) that gradient contributions are added into directly instead of a fresh
   * micro-batch `grad` — set by the engine when its reduce hook only adds each micro-batch's
   * gradient into that accumulator (hooks.ts `ReduceHook.accumulatesLocally`); `grad` then stays
   * null (no micro-batch gradient to consume). Never freed by the unit. */
  gradInto: Buf | null = null;
  /** The set this unit belongs to (gives access to the installed hooks). */
  readonly owner: UnitSet;

  constructor(owner: UnitSet, opts: UnitOptions) {
    const dtype = opts.dtype ?? "f32";
    if (dtype !== "f32" && dtype !== "bf16" && dtype !== "f16") throw new Error(`unit ${opts.name}: dtype must be f32, bf16 or f16, got ${dtype}`);
    this.owner = owner;
    this.be = owner.be;
    this.name = opts.name;
    this.kind = opts.kind;
    this.dtype = dtype;
    this.layer = opts.layer;
    this.expert = opts.expert;
    this.workingCopy = opts.workingCopy ?? true;
    let off = 0;
    const ps: Parameter[] = [];
    for (const spec of opts.params) {
      const p = new Parameter(this, spec, off);
      ps.push(p);
      off += p.numel;
    }
    this.params = ps;
    this.numel = off;
    if (opts.allocate ?? true) this.data = this.be.alloc(dtype, Math.max(off, 1), "param");
  }

  /** Whether `data` is resident. */
  get resident(): boolean {
    return this.data !== null;
  }

  /** The f32 buffer parameters read from: `data` for f32 units, `work` for 16-bit ones.
   * @throws naming the parameter and unit when it is not resident. */
  computeBuffer(paramName = "?"): Buf {
    if (this.dtype === "f32") {
      if (!this.data) throw new Error(`parameter ${paramName} of unit ${this.name} used while the unit is not gathered (unit.data is null)`);
      return this.data;
    }
    if (!this.workingCopy) throw new Error(`parameter ${paramName} of unit ${this.name} is kept in ${this.dtype} without an f32 working copy (workingCopy false): read it with Parameter.readView in an op that converts 16-bit values`);
    if (!this.work) throw new Error(`parameter ${paramName} of unit ${this.name} (${this.dtype}) used outside its gathered region (no f32 working copy; call enterUnit first)`);
    return this.work;
  }

  /** The f32 gradient accumulator: `grad` (f32 units) or `workGrad` (16-bit), allocated zeroed.
   * @throws for a 16-bit unit without a working copy (its gradient is the 16-bit `grad`). */
  computeGradBuffer(): Buf {
    if (this.dtype === "f32") {
      if (!this.grad) this.grad = this.be.alloc("f32", Math.max(this.numel, 1), "grad");
      return this.grad;
    }
    if (!this.workingCopy) throw new Error(`unit ${this.name} keeps its gradient in ${this.dtype} without an f32 accumulator (workingCopy false): add contributions through Parameter.gradSinkView`);
    if (!this.workGrad) this.workGrad = this.be.alloc("f32", Math.max(this.numel, 1), "grad");
    return this.workGrad;
  }

  /** Make the f32 working copy of a 16-bit unit from `data` (no-op for f32 units, units without a
   * working copy, or if present). */
  materialize(): void {
    if (this.dtype === "f32" || !this.workingCopy || this.work) return;
    if (!this.data) throw new Error(`unit ${this.name}: cannot make the f32 working copy, unit.data is null (gather hook did not provide it)`);
    this.work = this.be.alloc("f32", Math.max(this.numel, 1), "activation");
    if (this.numel > 0) this.be.cast({ buf: this.data, off: 0 }, { buf: this.work, off: 0 }, this.numel);
  }

  /** Drop the f32 working copy (16-bit units). */
  dematerialize(): void {
    if (this.work) {
      this.be.free(this.work);
      this.work = null;
    }
  }

  /** For 16-bit units: write `grad` = cast(workGrad). For f32 units and units without a working
   * copy (whose contributions are in `grad` already) only make sure `grad` exists (zeros when
   * nothing contributed). */
  finalizeGrad(): void {
    if (this.dtype === "f32") {
      this.computeGradBuffer();
      return;
    }
    if (!this.workingCopy) {
      // contributions went into the engine's accumulator (gradInto) or into `grad` already
      if (!this.gradInto && !this.grad) this.grad = this.be.alloc(this.dtype, Math.max(this.numel, 1), "grad");
      return;
    }
    const wg = this.computeGradBuffer();
    if (!this.grad) this.grad = this.be.alloc(this.dtype, Math.max(this.numel, 1), "grad");
    if (this.numel > 0) this.be.cast({ buf: wg, off: 0 }, { buf: this.grad, off: 0 }, this.numel);
  }

  /** Zero the gradient buffers (allocating nothing). With `free`, release them instead. */
  zeroGrad(free = false): void {
    for (const k of ["grad", "workGrad"] as const) {
      const b = this[k];
      if (!b) continue;
      if (free) {
        this.be.free(b);
        this[k] = null;
      } else this.be.fill({ buf: b, off: 0 }, 0, b.length);
    }
  }

  /** Free every buffer of this unit. */
  destroy(): void {
    this.zeroGrad(true);
    this.dematerialize();
    if (this.data) this.be.free(this.data);
    this.data = null;
  }

  // ---- TapeUnit (backward sweep) -------------------------------------------------------------
  /** Fires `gather(unit, "bwd")` and makes the working copy. */
  async enterBackward(): Promise<void> {
    await this.owner.hooks.gather(this, "bwd");
    this.materialize();
  }

  /** Produces `grad` (cast for 16-bit), fires `gradReady`, drops the working copy, fires
   * `release(unit, "bwd")`. */
  async finishBackward(): Promise<void> {
    if (this.trainable) {
      this.finalizeGrad();
      await this.owner.hooks.gradReady(this);
    }
    this.dematerialize();
    await this.owner.hooks.release(this, "bwd");
  }

  toString(): string {
    return `Unit(${this.name}, ${this.kind}, ${this.dtype}, ${this.numel} elements)`;
  }
}

/** A model's units in forward order, the name → parameter index, and the installed hooks. */
export class UnitSet {
  readonly be: Backend;
  readonly units: Unit[] = [];
  private readonly byName = new Map<string, Parameter>();
  private readonly unitNames = new Set<string>();
  /** Installed hooks (engine/plugins replace this; default no-ops). */
  hooks: UnitHooks = NO_OP_HOOKS;

  constructor(be: Backend) {
    this.be = be;
  }

  /** Create and append a unit. @throws on a duplicate unit or parameter name. */
  add(opts: UnitOptions): Unit {
    // a Set, not a scan of the units: a 4096-layer config built its units in O(layers²) (0.6 s)
    if (this.unitNames.has(opts.name)) throw new Error(`duplicate unit name ${opts.name}`);
    const u = new Unit(this, opts);
    for (const p of u.params) {
      if (this.byName.has(p.name)) throw new Error(`duplicate parameter name ${p.name} (unit ${u.name})`);
      this.byName.set(p.name, p);
    }
    this.unitNames.add(u.name);
    this.units.push(u);
    return u;
  }

  /** The parameter with this Hugging Face name. @throws listing a few known names if absent. */
  param(name: string): Parameter {
    const p = this.byName.get(name);
    if (!p) throw new Error(`no parameter named ${name} (known: ${[...this.byName.keys()].slice(0, 6).join(", ")}, …)`);
    return p;
  }

  /** Whether a parameter with this name exists. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The unit with this name. @throws if absent. */
  unit(name: string): Unit {
    const u = this.units.find((x) => x.name === name);
    if (!u) throw new Error(`no unit named ${name}`);
    return u;
  }

  /** All parameters in unit order. */
  parameters(): Parameter[] {
    return this.units.flatMap((u) => [...u.params]);
  }

  /** Total parameter elements over all units. */
  get numel(): number {
    return this.units.reduce((s, u) => s + u.numel, 0);
  }

  /** Zero (or free) all gradient buffers. */
  zeroGrad(free = false): void {
    for (const u of this.units) u.zeroGrad(free);
  }

  /** Free every buffer of every unit. */
  destroy(): void {
    for (const u of this.units) u.destroy();
  }
}

/** Enter a unit's forward region: `gather(unit, "fwd")`, make the f32 working copy, record the
 * tape marker. */
export async function enterUnit(unit: Unit): Promise<void> {
  await unit.owner.hooks.gather(unit, "fwd");
  unit.materialize();
  markUnit("enter", unit);
}

/** Leave a unit's forward region: record the marker, drop the working copy, `release(unit, "fwd")`. */
export async function leaveUnit(unit: Unit): Promise<void> {
  markUnit("leave", unit);
  unit.dematerialize();
  await unit.owner.hooks.release(unit, "fwd");
}

/** Validate a shape against a parameter (for loaders). @throws naming both shapes. */
export function checkParamShape(p: Parameter, shape: readonly number[], source: string): void {
  if (shape.length !== p.shape.length || shape.some((d, i) => d !== p.shape[i])) {
    throw new Error(`${source}: ${p.name} has shape ${fmtShape(shape)}, the model expects ${fmtShape(p.shape)}`);
  }
}
