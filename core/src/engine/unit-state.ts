/**
 * Per-unit engine state on one rank: the buffers a unit's plan says this rank holds.
 *
 * | buffer      | when                               | length        | dtype          | tag   |
 * |-------------|------------------------------------|---------------|----------------|-------|
 * | unit.data   | params replicated (or gathered)    | numel         | param dtype    | param (gathered under ZeRO-3) |
 * | paramShard  | params sharded                     | shardSize     | param dtype    | param |
 * | gradAcc     | grads replicated                   | numel         | param dtype    | grad  |
 * | gradShard   | grads sharded                      | shardSize     | param dtype    | grad  |
 * | master      | mixed precision                    | optim length  | f32            | optim |
 * | m, v        | always                             | optim length  | f32            | optim |
 *
 * "optim length" is `shardSize` when optimizer states are sharded, else `numel`. With f32 training
 * the parameters themselves are the master copy (docs/domain.md §1: 4 + 4 + 8 bytes per parameter).
 * A frozen unit (`unit.trainable` false, the job's `freeze`) holds only its parameters: no gradient
 * and no optimizer buffer.
 *
 * A UnitState is the {@link UnitHandle} hooks receive (plugin-context.ts): plugins reach the
 * buffers only through the handle's verbs.
 */
import type { Backend, Buf, DType, View } from "@zeromoe/kernels";
import { bf16ToNumber, DTYPE_BYTES, f16ToNumber } from "@zeromoe/kernels";
import type { Group } from "../comm/communicator.ts";
import type { Unit, UnitKind } from "../nn/unit.ts";
import { paddingElements, type UnitPlan } from "./plan.ts";
import type { HostOptimizerState, HostParamShard, OptimizerDevice, OptimizerStateName, UnitHandle } from "./plugin-context.ts";

/** Whether a rank counts a unit's reduced gradient in global sums (gradient norm; statistics):
 * its optimizer range when optimizer states are sharded, group rank 0 when they are replicated —
 * every element counts exactly once over all ranks. */
export function countsGradient(plan: UnitPlan, optimCount: number, trainable = true): boolean {
  if (!trainable) return false; // a frozen unit has no gradient
  return plan.optim === "sharded" ? optimCount > 0 : plan.group.rank === 0 && plan.numel > 0;
}

export class UnitState implements UnitHandle {
  readonly unit: Unit;
  readonly plan: UnitPlan;
  paramShard: Buf | null = null;
  gradAcc: Buf | null = null;
  gradShard: Buf | null = null;
  master: Buf | null = null;
  m: Buf | null = null;
  v: Buf | null = null;
  /** Where the optimizer states live (set by the engine from the offload hook before allocate). */
  optimizerDevice: OptimizerDevice = "device";
  /** The offloaded states (optimizerDevice "cpu"/"nvme"), else null. */
  host: HostOptimizerState | null = null;
  /** Where the sharded parameters live (set by the engine from the offload hook). */
  paramDevice: OptimizerDevice = "device";
  /** The host copy of an offloaded parameter shard, else null. */
  paramHost: HostParamShard | null = null;
  /** The device copy of an offloaded shard may differ from the host copy. */
  private paramDirty = false;
  private be: Backend | null = null;
  constructor(unit: Unit, plan: UnitPlan) {
    this.unit = unit;
    this.plan = plan;
  }

  get name(): string {
    return this.unit.name;
  }
  get kind(): UnitKind {
    return this.unit.kind;
  }
  get layer(): number | undefined {
    return this.unit.layer;
  }
  get expert(): number | undefined {
    return this.unit.expert;
  }
  get numel(): number {
    return this.unit.numel;
  }
  get dtype(): DType {
    return this.unit.dtype;
  }
  get group(): Group {
    return this.plan.group;
  }
  get countsGradient(): boolean {
    return countsGradient(this.plan, this.optimCount, this.trainable);
  }
  /** False for a frozen unit (`freeze`, engine/freeze.ts): no gradient, no optimizer state. */
  get trainable(): boolean {
    return this.unit.trainable;
  }

  params(): Buf | null {
    return this.unit.data;
  }
  setParams(buf: Buf | null): void {
    this.unit.data = buf;
  }
  paramStorage(): { buf: Buf; start: number; count: number } {
    if (!this.paramShard && this.paramHost) {
      this.materializeParams();
      this.paramDirty = true; // the caller may write through it: written back at eviction
    }
    if (this.paramShard) return { buf: this.paramShard, start: this.plan.shardStart, count: this.plan.owned };
    if (!this.unit.data) throw new Error(`unit ${this.unit.name}: neither a parameter shard nor resident parameters on this rank`);
    return { buf: this.unit.data, start: 0, count: this.unit.numel };
  }
  microGrad(): Buf | null {
    return this.unit.grad;
  }
  releaseMicroGrad(): void {
    this.unit.zeroGrad(true);
  }
  gradAccumulator(): Buf {
    const g = this.gradShard ?? this.gradAcc;
    if (!g) throw new Error(`unit ${this.unit.name}: no gradient buffer (${this.trainable ? "not allocated" : "the unit is frozen"})`);
    return g;
  }
  ownedGrad(): { view: View; n: number } {
    const n = this.optimCount;
    if (this.gradShard) return { view: { buf: this.gradShard, off: 0 }, n };
    return { view: { buf: this.gradAccumulator(), off: this.optimStart }, n };
  }
  optimizerState(): { master: Buf | null; m: Buf; v: Buf } {
    if (this.host) throw new Error(`unit ${this.unit.name}: optimizer states are offloaded to ${this.host.device} (use readOptimizerState/writeOptimizerState)`);
    if (!this.m || !this.v) throw new Error(`unit ${this.unit.name}: optimizer state not allocated${this.trainable ? "" : " (the unit is frozen)"}`);
    return { master: this.master, m: this.m, v: this.v };
  }
  hostOptimizerState(): HostOptimizerState | null {
    return this.host;
  }
  hostParams(): HostParamShard | null {
    return this.paramHost;
  }
  paramsResident(): boolean {
    return this.paramShard !== null || (this.paramHost === null && this.unit.data !== null);
  }
  prefetchParams(): void {
    if (this.paramShard || !this.paramHost) return;
    this.materializeParams();
    this.paramDirty = false;
  }
  /** @param writeBack write the device copy back even when it is clean (the engine's first eviction) */
  async evictParams(writeBack = false): Promise<void> {
    const buf = this.paramShard;
    if (!buf || !this.paramHost || !this.be) return;
    if (this.paramDirty || writeBack) {
      const raw = await this.be.read({ buf, off: 0 }, this.plan.shardSize);
      await this.paramHost.write(0, raw instanceof Float64Array ? Float32Array.from(raw) : (raw as Float32Array | Uint16Array));
    }
    this.be.free(buf);
    this.paramShard = null;
    this.paramDirty = false;
  }
  private materializeParams(): void {
    if (!this.be) throw new Error(`unit ${this.unit.name}: parameters offloaded before the unit's buffers were allocated`);
    const buf = this.be.alloc(this.unit.dtype, this.plan.shardSize, "param");
    this.be.write({ buf, off: 0 }, this.paramHost!.loadSync());
    this.paramShard = buf;
  }
  private deviceState(state: OptimizerStateName): Buf {
    const b = state === "master" ? this.master : state === "m" ? this.m : this.v;
    if (!b || !this.be) throw new Error(`unit ${this.unit.name}: no device optimizer state "${state}"${state === "master" ? " (fp32 training keeps no separate master copy)" : ""}`);
    return b;
  }
  async readOptimizerState(state: OptimizerStateName, off: number, n: number): Promise<Float32Array> {
    if (!this.trainable) return this.frozenState(state, off, n);
    if (this.host) return this.host.read(state, off, n);
    const got = await this.be!.read({ buf: this.deviceState(state), off }, n);
    return got instanceof Float32Array ? got : Float32Array.from(got as ArrayLike<number>);
  }
  async writeOptimizerState(state: OptimizerStateName, off: number, data: Float32Array): Promise<void> {
    if (!this.trainable) return; // a frozen unit keeps no optimizer state: nothing to write
    if (this.host) return this.host.write(state, off, data);
    this.be!.write({ buf: this.deviceState(state), off }, data);
  }

  /** A frozen unit's optimizer state as a checkpoint stores it (so a later job may unfreeze it):
   * the master is its parameters widened to f32, m and v are zero (never updated). */
  private async frozenState(state: OptimizerStateName, off: number, n: number): Promise<Float32Array> {
    if (state !== "master") return new Float32Array(n);
    const stored = this.paramStorage();
    const raw = await this.be!.read({ buf: stored.buf, off: this.optimStart - stored.start + off }, n);
    if (raw instanceof Float32Array) return raw;
    if (raw instanceof Uint16Array) {
      const dec = this.unit.dtype === "f16" ? f16ToNumber : bf16ToNumber;
      return Float32Array.from(raw, dec);
    }
    return Float32Array.from(raw as ArrayLike<number>);
  }

  /** First element (in unit coordinates) of the optimizer's range on this rank. */
  get optimStart(): number {
    return this.plan.optim === "sharded" ? this.plan.shardStart : 0;
  }

  /** Real elements the optimizer updates on this rank. */
  get optimCount(): number {
    return this.plan.optim === "sharded" ? this.plan.owned : this.plan.numel;
  }

  /** Allocated length of optimizer buffers (shard including padding, or the whole unit). */
  get optimLength(): number {
    return this.plan.optim === "sharded" ? this.plan.shardSize : Math.max(1, this.plan.numel);
  }

  /** Padding bytes this rank holds for this unit (sharded states only). */
  paddingBytes(mixed: boolean): number {
    const pad = paddingElements(this.plan);
    const pb = DTYPE_BYTES[this.unit.dtype];
    let b = 0;
    if (this.plan.params === "sharded" && this.paramDevice === "device") b += pad * pb;
    if (!this.trainable) return b; // no gradient or optimizer buffers
    if (this.plan.grads === "sharded") b += pad * pb;
    if (this.plan.optim === "sharded" && this.optimizerDevice === "device") b += pad * (mixed ? 12 : 8);
    return b;
  }

  /** Allocate the gradient and optimizer buffers the plan calls for (zeroed); no optimizer buffer
   * when the states are offloaded (`optimizerDevice` not "device"); neither for a frozen unit
   * (`unit.trainable` false: no gradient, no master, m or v). */
  allocate(be: Backend, mixed: boolean): void {
    const p = this.plan;
    const dt = this.unit.dtype;
    this.be = be;
    if (!this.trainable) return;
    if (p.grads === "sharded") this.gradShard = be.alloc(dt, p.shardSize, "grad");
    else this.gradAcc = be.alloc(dt, Math.max(1, p.numel), "grad");
    if (this.optimizerDevice !== "device") return;
    const len = this.optimLength;
    this.m = be.alloc("f32", len, "optim");
    this.v = be.alloc("f32", len, "optim");
    if (mixed) this.master = be.alloc("f32", len, "optim");
  }

  /** Free every buffer this state owns (not `unit.data`). */
  destroy(be: Backend): void {
    if (this.unit.gradInto !== null && (this.unit.gradInto === this.gradAcc || this.unit.gradInto === this.gradShard)) this.unit.gradInto = null;
    for (const k of ["paramShard", "gradAcc", "gradShard", "master", "m", "v"] as const) {
      const b = this[k];
      if (b) be.free(b);
      this[k] = null;
    }
    this.host?.free();
    this.host = null;
    this.paramHost?.free();
    this.paramHost = null;
  }
}
