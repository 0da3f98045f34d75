/**
 * `Tensor`: a backend {@link View} plus a shape and a dtype, with autograd bookkeeping.
 *
 * Three kinds of tensor exist, distinguished by where their data comes from:
 * - **owned**: the tensor allocated its own buffer (tag `activation` for op outputs). It is freed by
 *   {@link Tensor.dispose}, by the tape after `backward`, or by the enclosing `noGrad`/`scope` arena.
 * - **view**: shares the buffer of a `base` tensor at an element offset (reshape, sliceRows). Views
 *   never free anything; they are valid as long as their base is.
 * - **parameter**: the data lives in a parameter unit's flat buffer and is resolved through the unit
 *   *each time* `.view` is read (see `core/src/nn/unit.ts`), so ZeRO-3 may free and re-gather the
 *   unit's buffer between forward and backward.
 *
 * Memory lifetime rules (see `tape.ts`): every owned tensor is registered with the current arena when
 * created; `backward(loss)` frees all of the tape's tensors (except those `retain()`ed), and a
 * `noGrad`/`scope` frees the tensors created inside it except the ones it returns.
 */
import type { Backend, Buf, DType, HostArray, View } from "@zeromoe/kernels";
import { DTYPE_BYTES } from "@zeromoe/kernels";
import { trackTensor } from "./arena.ts";

/** What a parameter tensor resolves its storage through (implemented by `nn/unit.ts` `Parameter`). */
export interface ParamSource {
  /** Hugging Face name, e.g. `model.layers.0.self_attn.q_proj.weight`. */
  readonly name: string;
  /** Current f32 compute view of the parameter's data. Throws when the unit is not resident. */
  dataView(): View;
  /** f32 view of the parameter's gradient accumulator (allocated zeroed on first use). Gradient
   * contributions are always *added* here (micro-batch accumulation). */
  gradView(): View;
  /** For ops that convert 16-bit values themselves (nn/moe/grouped-linear.ts): the values as
   * stored — the f32 compute view, or a bf16/f16 view when the source keeps no f32 copy. Absent:
   * use `dataView`. */
  readView?(): View;
  /** For the same ops: where the gradient contribution is added — an f32 accumulator, or a
   * bf16/f16 buffer the op reads, adds to in f32 and writes back rounded. Absent: `gradView`. */
  gradSinkView?(): View;
  /** Whether gradients are wanted for this parameter. */
  readonly trainable: boolean;
}

/** Number of elements of a shape (1 for a scalar `[]`). Throws on negative or non-integer dims. */
export function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new Error(`invalid shape [${shape.join(", ")}]: dimensions must be non-negative integers`);
    n *= d;
  }
  return n;
}

/** Format a shape for error messages. */
export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

let nextTensorId = 1;

/** Options for constructing a tensor; most code uses the helpers ({@link empty}, {@link fromArray}). */
export interface TensorInit {
  buf?: Buf;
  off?: number;
  base?: Tensor;
  param?: ParamSource;
  owns?: boolean;
}

/** A tensor (see the module comment). Shapes are row-major; `numel` = product of `shape`. */
export class Tensor {
  /** Unique id (debugging, map keys). */
  readonly id = nextTensorId++;
  readonly be: Backend;
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly numel: number;
  private ownRequiresGrad = false;
  /** Set by `retain()`: the tape/arena will not free this tensor; the caller must `dispose()` it. */
  retained = false;
  /** For view tensors: the tensor whose buffer is shared. */
  readonly base: Tensor | null;
  /** For parameter tensors: where the data is resolved. */
  readonly param: ParamSource | null;
  private buf: Buf | null;
  private readonly off: number;
  private readonly owns: boolean;
  private freed = false;

  constructor(be: Backend, shape: readonly number[], dtype: DType, init: TensorInit) {
    this.be = be;
    // a private copy (the caller may reuse its array); not Object.freeze'd: JSC turns a frozen array
    // into slow storage, and freezing plus indexing it cost several µs per tensor in a training step
    this.shape = shape.slice();
    this.dtype = dtype;
    this.numel = numelOf(shape);
    this.base = init.base ?? null;
    this.param = init.param ?? null;
    this.buf = init.buf ?? null;
    this.off = init.off ?? 0;
    this.owns = init.owns ?? false;
  }

  /** True when gradients flow to this tensor: set by recorded ops; for parameter tensors it is
   * the parameter's (unit's) current `trainable` flag. */
  get requiresGrad(): boolean {
    return this.param ? this.param.trainable : this.ownRequiresGrad;
  }

  set requiresGrad(v: boolean) {
    if (this.param) throw new Error(`requiresGrad of parameter ${this.param.name} follows its unit's \`trainable\` flag; set that instead`);
    this.ownRequiresGrad = v;
  }

  /** Rank (number of dimensions). */
  get ndim(): number {
    return this.shape.length;
  }

  /** Size of the last dimension (1 for a scalar). */
  get cols(): number {
    return this.shape.length === 0 ? 1 : this.shape[this.shape.length - 1]!;
  }

  /** numel / cols: the number of rows when the tensor is seen as [rows, cols]. */
  get rows(): number {
    const c = this.cols;
    return c === 0 ? 0 : this.numel / c;
  }

  /** Whether this tensor's buffer was freed. */
  get isDisposed(): boolean {
    if (this.base) return this.base.isDisposed;
    return this.freed;
  }

  /** The device view of the data. Parameter tensors resolve through their unit on every access.
   * @throws if the tensor (or its base) was disposed. */
  get view(): View {
    if (this.param) return this.param.dataView();
    if (this.base) {
      const b = this.base.view;
      return { buf: b.buf, off: b.off + this.off };
    }
    if (this.freed || !this.buf) {
      throw new Error(`tensor #${this.id} ${fmtShape(this.shape)} ${this.dtype} was already freed (by backward(), a noGrad/scope arena, or dispose()); call retain() on tensors you need afterwards`);
    }
    return { buf: this.buf, off: this.off };
  }

  /** Keep this tensor alive past `backward` and arena ends; the caller must `dispose()` it later. */
  retain(): this {
    this.retained = true;
    if (this.base) this.base.retain();
    return this;
  }

  /** Free the buffer if this tensor owns it. For a view, frees the base's buffer (which every view
   * of it shares). No-op for parameters or if already freed. */
  dispose(): void {
    if (this.base) {
      this.base.dispose();
      return;
    }
    if (!this.owns || this.freed || !this.buf) return;
    this.be.free(this.buf);
    this.freed = true;
    this.buf = null;
  }

  /** Internal: dispose an owned buffer unless retained (used by arenas and the tape; never
   * follows a view to its base). */
  disposeIfTemporary(): void {
    if (!this.retained && !this.base) this.dispose();
  }

  /** Whether this tensor owns a buffer (views and parameters do not). */
  get ownsBuffer(): boolean {
    return this.owns;
  }

  /** Bytes of device memory owned by this tensor (0 for views and parameters). */
  get ownedBytes(): number {
    return this.owns && !this.freed ? this.numel * DTYPE_BYTES[this.dtype] : 0;
  }

  /** Copy the data to the host (waits for enqueued work). f32 → Float32Array (Float64Array on a
   * cpu backend in f64 precision), i32 → Int32Array, f16/bf16 → Uint16Array bits. */
  async toArray(): Promise<HostArray> {
    return this.be.read(this.view, this.numel);
  }

  /** The single value of a one-element tensor. @throws if numel ≠ 1. */
  async item(): Promise<number> {
    if (this.numel !== 1) throw new Error(`item(): tensor has shape ${fmtShape(this.shape)} (${this.numel} elements), expected exactly 1`);
    const a = await this.toArray();
    return Number(a[0]);
  }

  toString(): string {
    return `Tensor#${this.id}${fmtShape(this.shape)}:${this.dtype}${this.param ? `(param ${this.param.name})` : ""}`;
  }
}

/** Allocate an owned tensor (contents zero) tagged `activation` and register it with the current
 * arena. @throws if the backend refuses the allocation. */
export function empty(be: Backend, shape: readonly number[], dtype: DType = "f32"): Tensor {
  return allocTracked(be, shape, dtype, "zeros");
}

/** Alias of {@link empty}: backend allocations are zero-filled. */
export const zeros = empty;

/** Like {@link empty}, but the contents are unspecified (zeros, or what a recycled device buffer
 * held: `Backend.alloc` with contents "any", which spares the webgpu backend a clear of the pooled
 * buffer — ~2.6 TB/s of GPU time on the H200). Only for the output of an op that overwrites every
 * element before anything reads it. @throws if the backend refuses the allocation. */
export function uninit(be: Backend, shape: readonly number[], dtype: DType = "f32"): Tensor {
  return allocTracked(be, shape, dtype, "any");
}

/** The owned `activation` tensor of {@link empty} / {@link uninit}, registered with the arena. */
function allocTracked(be: Backend, shape: readonly number[], dtype: DType, contents: "zeros" | "any"): Tensor {
  const buf = be.alloc(dtype, numelOf(shape), "activation", contents);
  const t = new Tensor(be, shape, dtype, { buf, off: 0, owns: true });
  trackTensor(t);
  return t;
}

/** An owned tensor holding `data` (length must equal the shape's numel). For f32, pass a
 * Float32Array or Float64Array; for i32 an Int32Array (a plain number[] is converted).
 * @throws on a length mismatch. */
export function fromArray(be: Backend, data: HostArray | readonly number[], shape: readonly number[], dtype: DType = "f32"): Tensor {
  const n = numelOf(shape);
  if (data.length !== n) throw new Error(`fromArray: data has ${data.length} elements but shape ${fmtShape(shape)} needs ${n}`);
  let host: HostArray;
  if (Array.isArray(data)) {
    host = dtype === "i32" ? Int32Array.from(data) : dtype === "u32" ? Uint32Array.from(data) : dtype === "f32" ? Float64Array.from(data) : Uint16Array.from(data);
  } else {
    host = data as HostArray;
  }
  const t = empty(be, shape, dtype);
  if (n > 0) be.write(t.view, host);
  return t;
}

/** A tensor of the given shape filled with `value` (f32). */
export function full(be: Backend, shape: readonly number[], value: number): Tensor {
  const t = empty(be, shape, "f32");
  if (t.numel > 0) be.fill(t.view, value, t.numel);
  return t;
}

/** Dispose several tensors (skips null/undefined). */
export function dispose(...ts: (Tensor | null | undefined)[]): void {
  for (const t of ts) t?.dispose();
}

/**
 * A persistent leaf tensor with its own data and gradient buffers (like a PyTorch leaf with
 * `requires_grad=True`): ops read `tensor`, and `backward` adds into `grad`. Not owned by any arena;
 * call `dispose()` to free both buffers. Used for tests and for standalone tensors outside units.
 */
export class Variable implements ParamSource {
  readonly name: string;
  readonly trainable: boolean;
  readonly tensor: Tensor;
  private data: Buf | null;
  private gradBuf: Buf | null = null;
  private readonly be: Backend;

  /** `data` of `shape` (f32), tagged `other`. */
  constructor(be: Backend, data: HostArray | readonly number[], shape: readonly number[], opts: { name?: string; trainable?: boolean } = {}) {
    this.be = be;
    this.name = opts.name ?? "variable";
    this.trainable = opts.trainable ?? true;
    const n = numelOf(shape);
    if (data.length !== n) throw new Error(`Variable ${this.name}: data has ${data.length} elements, shape ${fmtShape(shape)} needs ${n}`);
    this.data = be.alloc("f32", n, "other");
    if (n > 0) be.write({ buf: this.data, off: 0 }, Array.isArray(data) ? Float64Array.from(data) : (data as HostArray));
    this.tensor = new Tensor(be, shape, "f32", { param: this });
  }

  /** The data buffer's view. @throws after `dispose()`. */
  dataView(): View {
    if (!this.data) throw new Error(`Variable ${this.name} was disposed`);
    return { buf: this.data, off: 0 };
  }

  /** The gradient accumulator's view (allocated zeroed, tag `other`, on first use). */
  gradView(): View {
    if (!this.gradBuf) this.gradBuf = this.be.alloc("f32", Math.max(this.tensor.numel, 1), "other");
    return { buf: this.gradBuf, off: 0 };
  }

  /** The accumulated gradient on the host (zeros if none was produced). */
  async grad(): Promise<HostArray> {
    return this.be.read(this.gradView(), this.tensor.numel);
  }

  /** Zero the gradient accumulator. */
  zeroGrad(): void {
    if (this.gradBuf) this.be.fill({ buf: this.gradBuf, off: 0 }, 0, this.tensor.numel);
  }

  /** Overwrite the data from the host. */
  set(data: HostArray): void {
    this.be.write(this.dataView(), data);
  }

  /** Free data and gradient buffers. */
  dispose(): void {
    if (this.data) this.be.free(this.data);
    if (this.gradBuf) this.be.free(this.gradBuf);
    this.data = null;
    this.gradBuf = null;
  }
}
