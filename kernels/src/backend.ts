/**
 * The device contract every backend (`cpu`, `webgpu`) implements.
 *
 * An op is a pure function of buffers: no autograd, no model. Ops are *enqueued*: they return
 * immediately; on the webgpu backend they are recorded into a command encoder and submitted in
 * batches. The only host synchronisation point is {@link Backend.read} (and `flush`), which returns a
 * Promise. On the cpu backend ops run eagerly and `read` resolves at once.
 *
 * Conventions used by every op below
 * - Element offsets, never byte offsets: a {@link View} is `{buf, off}` where `off` counts elements
 *   of the buffer's dtype. Shapes are row-major. `n` is an element count.
 * - Compute dtype is f32 unless an op says otherwise. `f16`/`bf16` buffers are storage formats; use
 *   {@link Backend.cast} to move between them. `i32`/`u32` hold indices.
 * - Outputs never alias inputs unless an op says "in place".
 * - Accumulations (sums, softmax, norms) are in f32 with the max subtracted where relevant
 *   (docs/domain.md §5). The cpu backend may be created with `precision: "f64"`: then its f32 buffers are
 *   stored as Float64Array and every op computes in float64 — used for finite-difference checks.
 */

/** Element types a buffer can hold. Sizes in bytes: f32 4, f16 2, bf16 2, i32 4, u32 4. */
export type DType = "f32" | "f16" | "bf16" | "i32" | "u32";

/** What a buffer holds, for memory accounting (docs/domain.md §1 reports these separately). */
export type MemTag = "param" | "grad" | "optim" | "activation" | "gathered" | "comm" | "other";

export const MEM_TAGS: readonly MemTag[] = ["param", "grad", "optim", "activation", "gathered", "comm", "other"];

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, u32: 4 };

/** An allocated device buffer. Opaque to callers except for the fields below. */
/** RoPE frequencies: the base theta, or the headDim/2 inverse frequencies themselves. */
export type RopeFreq = number | Float64Array;

export interface Buf {
  /** Element type. */
  readonly dtype: DType;
  /** Length in elements. */
  readonly length: number;
  /** Accounting tag. */
  readonly tag: MemTag;
  /** Unique id within its backend (for debugging and pipeline bind-group caching). */
  readonly id: number;
}

/** A buffer plus an element offset. */
export interface View {
  buf: Buf;
  /** Offset in elements of `buf.dtype`. */
  off: number;
}

/** Host-side array type matching a dtype: f32 → Float32Array (Float64Array in f64 precision mode),
 * f16/bf16 → Uint16Array (raw bits), i32 → Int32Array, u32 → Uint32Array. */
export type HostArray = Float32Array | Float64Array | Uint16Array | Int32Array | Uint32Array;

/** Per-tag memory in bytes: current and peak (peak of the sum over all tags is `peakTotal`). */
export interface MemoryStats {
  current: Record<MemTag, number>;
  peak: Record<MemTag, number>;
  /** Highest value ever reached by the sum of all current tags, in bytes. */
  peakTotal: number;
}

export type UnaryOp = "neg" | "exp" | "log" | "sqrt" | "rsqrt" | "gelu_tanh" | "gelu_erf" | "silu" | "relu" | "sigmoid" | "square" | "abs";
export type BinaryOp = "add" | "sub" | "mul" | "div" | "max" | "min";
export type ReduceOp = "sum" | "mean" | "max" | "sumsq";

/** Description of a (possibly batched, possibly transposed) matmul: out[b] = op(A[b]) · op(B[b]).
 * op(A) is M×K, op(B) is K×N, out is M×N, all row-major. With `transA`, A is stored K×M; with
 * `transB`, B is stored N×K. `batch` matrices; `strideA/strideB/strideOut` are element strides
 * between consecutive batch matrices (0 broadcasts one matrix to every batch). If `accumulate`,
 * out += result (for gradient accumulation) instead of out = result. */
export interface MatmulSpec {
  M: number;
  N: number;
  K: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  strideA?: number;
  strideB?: number;
  strideOut?: number;
  accumulate?: boolean;
}

/** A grouped matmul over variable-length row segments (torch `_grouped_mm`, CUTLASS grouped GEMM;
 * the projections of all local MoE experts in one op): for each group g the rows
 * [offsets[g], offsets[g+1]) of x [R, K] are multiplied by op(W_g) into the same rows of out [R, N],
 * W_g at element g·strideW of w, stored K×N, or N×K with `transB` (linear weights [out, in]). */
export interface GroupedMatmulSpec {
  /** G + 1 row offsets on the host: offsets[0] = 0 ≤ offsets[1] ≤ … ≤ offsets[G] = R. Empty
   * groups are allowed. */
  offsets: readonly number[];
  N: number;
  K: number;
  transB?: boolean;
  /** Elements between consecutive groups' W (default N·K). */
  strideW?: number;
  /** out += result instead of out = result. */
  accumulate?: boolean;
}

/** A grouped matmul whose G + 1 row offsets live in a DEVICE buffer (i32), so MoE routing never
 * comes to the host: as {@link GroupedMatmulSpec}, group g = rows [offsets[g], offsets[g+1]) of
 * x [R, K] times op(W_g) into the same rows of out [R, N]. The offsets must be non-decreasing from
 * offsets[0] ≥ 0 (they are clamped to [0, R] on the device, not checked); rows outside
 * [offsets[0], offsets[G]) are left untouched. */
export interface GroupedMatmulDevSpec {
  /** Groups (the offsets buffer holds G + 1 entries from its view's offset). */
  G: number;
  /** Rows x and out hold (an upper bound of offsets[G]). */
  R: number;
  N: number;
  K: number;
  transB?: boolean;
  /** Elements between consecutive groups' W (default N·K). */
  strideW?: number;
  /** out += result instead of out = result. */
  accumulate?: boolean;
}

/** The weight gradient of a grouped linear ({@link Backend.groupedWeightGrad}): for each group g,
 * dw_g [M, N] (+)= dy[rows_g]ᵀ · x[rows_g] with dy [R, M], x [R, N] and rows_g = [offsets[g],
 * offsets[g+1]) from a device i32 buffer (clamped to [0, R]); dw_g at element g·strideW of dw. An
 * empty group gives dw_g = 0 (unchanged when accumulating). */
export interface GroupedWeightGradSpec {
  G: number;
  R: number;
  M: number;
  N: number;
  /** Elements between consecutive groups' dw (default M·N). */
  strideW?: number;
  accumulate?: boolean;
}

/** Hyper-parameters of one AdamW step (Loshchilov & Hutter 2019; DeepSpeed `adam_w_mode`). */
export interface AdamWParams {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** Decoupled weight decay when `decoupled` (AdamW); else L2 added to the gradient (classic Adam). */
  weightDecay: number;
  decoupled: boolean;
  /** 1-based step count used for bias correction. */
  step: number;
  /** Multiply gradients by this first (1/loss_scale, 1/accumulation, clip coefficient combined). */
  gradScale: number;
  /** A device-side scale: the f32 pair [scale, skip] at this view (as {@link Backend.clipScale}
   * writes it). Gradients are multiplied by gradScale·scale, and when skip ≠ 0 nothing is updated
   * (param, m, v unchanged; param16 rewritten from the unchanged param). Lets the step run without
   * the host reading the gradient norm first. */
  scaleFrom?: View;
}

/** Inputs of {@link Backend.clipScale}. */
export interface ClipScaleParams {
  /** Loss scale × accumulation steps × world size: what the summed gradients are divided by. */
  lsDiv: number;
  /** `gradient_clipping` (≤ 0: no clipping). */
  maxNorm: number;
}

/** Hyper-parameters of {@link Backend.lambUpdate} (DeepSpeed FusedLamb, You et al. 2019). */
export interface LambParams {
  beta1: number;
  beta2: number;
  eps: number;
  /** true: denominator √(v + eps) (DeepSpeed `eps_inside_sqrt`, its mode 0); false: √v + eps. */
  epsInsideSqrt: boolean;
  /** Weight decay added to the update (wd·p), so it enters the trust ratio. */
  weightDecay: number;
  /** Multiply gradients by this first (1/loss_scale, 1/accumulation, clip coefficients combined). */
  gradScale: number;
}

/** A fill from a counter-based Philox stream ({@link Backend.randomFill}; the stream layout and the
 * integer transforms are kernels/src/numerics/random-fill.ts and philox-transform.ts). `key` is the
 * stream's two uint32 key words, `start` the stream element that lands at the view's offset
 * (an integer, start + n ≤ 2^53 − 1). normal: N(0, std²) with std 0 or in [2^−100, 2^100];
 * uniform: lo + (hi − lo)·u in f32, u a multiple of 2^−24 in [0, 1). */
export type RandomFillSpec =
  | { dist: "normal"; key: readonly [number, number]; start: number; std: number }
  | { dist: "uniform"; key: readonly [number, number]; start: number; lo: number; hi: number };

/** Information about the device a backend runs on (for `bun run report` and summaries). */
export interface BackendInfo {
  name: "cpu" | "webgpu";
  /** e.g. "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H200", or "cpu (TypeScript)". */
  adapter: string;
  /** Vulkan/Metal/DX12 for webgpu; "typescript" for cpu. */
  adapterBackend: string;
  /** "discrete-gpu" | "integrated-gpu" | "cpu" | "virtual-gpu" | "unknown". */
  adapterType: string;
  features: string[];
}

export interface Backend {
  readonly info: BackendInfo;

  // ---- memory -------------------------------------------------------------------------------
  /** Allocate `length` elements of `dtype`, tagged. Contents are zero — unless `contents` is
   * "any": then they are unspecified (zeros, or whatever a recycled buffer held), for a buffer the
   * caller overwrites entirely before reading it; a backend may skip the zeroing then (webgpu skips
   * the clear of a pooled buffer; cpu always zeroes). Throws on length < 0 or when the device
   * refuses (the message names bytes requested and the tag). */
  alloc(dtype: DType, length: number, tag: MemTag, contents?: "zeros" | "any"): Buf;
  /** Release a buffer; using it afterwards throws. Freeing twice throws. */
  free(buf: Buf): void;
  /** Change a buffer's accounting tag (e.g. a comm buffer becoming a param shard). */
  retag(buf: Buf, tag: MemTag): void;
  /** Current and peak bytes per tag. */
  memory(): MemoryStats;
  /** Reset peaks to current values. */
  resetPeak(): void;

  // ---- transfer -----------------------------------------------------------------------------
  /** Copy host data into `dst` starting at element `dst.off`. `data`'s type must match the dtype
   * (Uint16Array bits for f16/bf16); a Float32Array/Float64Array is accepted for f32 either way. */
  write(dst: View, data: HostArray): void;
  /** Read `n` elements starting at `src.off`. Waits for all enqueued work. */
  read(src: View, n: number): Promise<HostArray>;
  /** Wait until all enqueued work has completed. */
  flush(): Promise<void>;

  // ---- basic --------------------------------------------------------------------------------
  /** dst[i] = value for i < n (f32/i32/u32 buffers; for f16/bf16 the value is rounded). */
  fill(dst: View, value: number, n: number): void;
  /** dst[i] = src[i] for i < n; same dtype on both sides. */
  copy(src: View, dst: View, n: number): void;
  /** dst[i] = convert(src[i]) between f32/f16/bf16, rounding to nearest even. */
  cast(src: View, dst: View, n: number): void;
  /** dst[i] = element spec.start + i of a Philox stream for i < n (see {@link RandomFillSpec}),
   * computed on the device from the key and counters alone: f32 values, rounded to nearest even for
   * an f16/bf16 dst (as {@link cast} would). Bit-identical on every backend (integer transforms).
   * @throws on a bad spec (naming the field) or a dst that is not f32/f16/bf16. */
  randomFill(dst: View, n: number, spec: RandomFillSpec): void;

  // ---- elementwise (f32) --------------------------------------------------------------------
  /** y = op(x), n elements. */
  unary(op: UnaryOp, x: View, y: View, n: number): void;
  /** dx = dy · op'(x) (x is the forward input), n elements. For neg/square/abs too. */
  unaryBackward(op: UnaryOp, x: View, dy: View, dx: View, n: number): void;
  /** SwiGLU's activation fused (Shazeer 2020; vLLM `silu_and_mul`): out[i] = silu(gate[i])·up[i]
   * for i < n, silu(x) = x·σ(x). One kernel instead of `unary("silu")` + `binary("mul")`; the cpu
   * backend rounds silu(gate) to the storage type before the product, so it equals that pair bit for
   * bit. `out` must not overlap the inputs. */
  siluMul(gate: View, up: View, out: View, n: number): void;
  /** Backward of {@link siluMul} from its forward inputs, for i < n (both outputs overwritten, must
   * not overlap each other or the inputs): dUp[i] = dy[i]·silu(gate[i]) and
   * dGate[i] = (dy[i]·up[i])·σ(g)·(1 + g·(1 − σ(g))), g = gate[i]. One kernel instead of two
   * `binary("mul")` and an `unaryBackward("silu")`; cpu results equal those bit for bit. */
  siluMulBackward(gate: View, up: View, dy: View, dGate: View, dUp: View, n: number): void;
  /** y = alpha·x + beta (n elements). `scale` is alpha with beta 0. */
  affine(x: View, y: View, n: number, alpha: number, beta: number): void;
  /** out = a op b with numpy broadcasting. Shapes are given explicitly and right-aligned; `out`
   * has the broadcast shape. Throws if shapes don't broadcast. */
  binary(op: BinaryOp, a: View, aShape: readonly number[], b: View, bShape: readonly number[], out: View): void;
  /** y += alpha·x, n elements (in place on y). */
  axpy(alpha: number, x: View, y: View, n: number): void;

  // ---- reductions (f32) ---------------------------------------------------------------------
  /** Reduce the middle axis of an [outer, n, inner] array: out is [outer, inner]. */
  reduce(op: ReduceOp, x: View, out: View, outer: number, n: number, inner: number): void;

  // ---- rows: softmax, norms -----------------------------------------------------------------
  /** Row-wise softmax (or log-softmax) over `cols`, `rows` rows. */
  softmax(x: View, y: View, rows: number, cols: number, log: boolean): void;
  /** Backward of softmax/log-softmax given the forward output y. */
  softmaxBackward(y: View, dy: View, dx: View, rows: number, cols: number, log: boolean): void;
  /** y = x / sqrt(mean(x²) + eps) · w. `rstd` (rows) receives 1/sqrt(mean(x²)+eps) for backward. */
  rmsnorm(x: View, w: View, y: View, rstd: View, rows: number, cols: number, eps: number): void;
  /** dx, and dw accumulated (+=) over rows. */
  rmsnormBackward(x: View, w: View, rstd: View, dy: View, dx: View, dw: View, rows: number, cols: number): void;
  /** Residual add + RMSNorm fused (the pre-norm decoder's h2 = h + a; rmsnorm(h2)): sum = x + r
   * (rows × cols, written), then y = sum / sqrt(mean(sum²) + eps) · w with `rstd` (rows) saved, as
   * {@link rmsnorm} of `sum`. One kernel instead of `binary("add")` + `rmsnorm`; the cpu backend
   * equals that pair bit for bit. Outputs must not overlap the inputs. */
  addRmsnorm(x: View, r: View, w: View, sum: View, y: View, rstd: View, rows: number, cols: number, eps: number): void;
  /** Backward of {@link addRmsnorm} from its saved `sum` and `rstd`: dx = dSum + rmsnorm's dx for
   * `dy` (dSum = the gradient `sum` received from its other consumers; null = none), dw accumulated
   * (+=) as {@link rmsnormBackward}. dx may be dSum itself (in place). Replaces `rmsnormBackward`
   * into a temporary plus `axpy`; the cpu backend equals that pair bit for bit. */
  addRmsnormBackward(sum: View, w: View, rstd: View, dy: View, dSum: View | null, dx: View, dw: View, rows: number, cols: number): void;
  /** y = (x − mean)/sqrt(var + eps) · w + b; saves mean and rstd (rows each). */
  layernorm(x: View, w: View, b: View, y: View, mean: View, rstd: View, rows: number, cols: number, eps: number): void;
  /** dx; dw and db accumulated (+=) over rows. */
  layernormBackward(x: View, w: View, mean: View, rstd: View, dy: View, dx: View, dw: View, db: View, rows: number, cols: number): void;

  // ---- matmul -------------------------------------------------------------------------------
  /** See {@link MatmulSpec}. a, b, out: f32. */
  matmul(a: View, b: View, out: View, spec: MatmulSpec): void;
  /** See {@link GroupedMatmulSpec}: all groups in one op (one dispatch on a GPU). x, w, out: f32.
   * Each group's rows equal a `matmul` of those rows with op(W_g) up to f32 rounding (on the cpu
   * backend exactly: the same kernel per group). */
  groupedMatmul(x: View, w: View, out: View, spec: GroupedMatmulSpec): void;
  /** See {@link GroupedMatmulDevSpec}: all groups in one op with device offsets (i32). x, w, out:
   * f32. On the cpu backend each group is the same kernel call as `matmul` of its rows (bit-identical);
   * on a GPU one dispatch over ceil(R/BM) + G row tiles (the dense matmul generator's tiles, wgsl/grouped-matmul.ts). @throws on bad sizes (naming the field); the
   * cpu backend also throws on offsets that are not non-decreasing within [0, R]. */
  groupedMatmulDev(x: View, w: View, out: View, offsets: View, spec: GroupedMatmulDevSpec): void;
  /** See {@link GroupedWeightGradSpec}: per-group dW of a grouped linear in one op (one dispatch on a
   * GPU). dy, x, dw: f32; offsets i32 on the device. On the cpu backend each group is the same
   * kernel call as `matmul(dy_gᵀ, x_g)` with `transA` (bit-identical to a per-expert linear's dW). */
  groupedWeightGrad(dy: View, x: View, dw: View, offsets: View, spec: GroupedWeightGradSpec): void;

  // ---- embeddings, losses -------------------------------------------------------------------
  /** out[i, :] = table[ids[i], :], ids i32 (n rows), table [vocab, dim]. Throws nothing on device;
   * ids out of range produce zeros (validated on the host by callers). */
  embedding(table: View, ids: View, out: View, n: number, dim: number): void;
  /** dtable[ids[i], :] += dout[i, :] (deterministic order: row i ascending). */
  embeddingBackward(dout: View, ids: View, dtable: View, n: number, dim: number): void;
  /** Fused cross-entropy over rows of logits [rows, vocab] with i32 targets: losses[r] =
   * logsumexp(logits_r) − logits_r[t_r], and dlogits = (softmax − onehot)·gradScale. Rows whose
   * target equals `ignoreIndex` get loss 0 and zero gradient. */
  crossEntropy(logits: View, targets: View, losses: View, dlogits: View, rows: number, vocab: number, ignoreIndex: number, gradScale: number): void;
  /** Tiled cross-entropy, step 1 of 3 (the fused LM head + loss of core/src/tensor/ops/linear-cross-entropy.ts;
   * Apple's Cut Cross-Entropy, Liger-Kernel's fused linear cross-entropy): `logits` [rows, cols]
   * f32 holds columns [col0, col0 + cols) of `rows` rows' logits. For each row r whose targets[r]
   * (i32) ≠ ignoreIndex, the f32 state stats[3r..3r+3) = (m, s, x_t) — running max, Σ exp(x − m),
   * the target's logit — is merged with the tile (set from it when `first`; x_t = 0 until the
   * tile holding column t_r): m' = max(m, max_j x_j), s' = s·exp(m − m') + Σ_j exp(x_j − m')
   * (online softmax normaliser, Milakov & Gimelshein 2018). Ignored rows are left untouched. */
  crossEntropyTileStats(logits: View, targets: View, stats: View, rows: number, cols: number, col0: number, ignoreIndex: number, first: boolean): void;
  /** Tiled cross-entropy, step 2 (after the last tile): for each row with targets[r] ≠
   * ignoreIndex, lse[r] = m + log s and losses[r] = lse − x_t + zLoss·lse² (PaLM's z-loss, f32);
   * both 0 for ignored rows. A target outside [0, vocab) that is not ignoreIndex gives loss NaN
   * (the cpu backend throws, naming the row). */
  crossEntropyTileFinish(stats: View, targets: View, lse: View, losses: View, rows: number, vocab: number, ignoreIndex: number, zLoss: number): void;
  /** Tiled cross-entropy, step 3 (backward of one tile, IN PLACE on `logits` [rows, cols] =
   * columns [col0, col0 + cols)): logits[r, j] ← g·gradScale·(exp(x − lse_r)·(1 + 2·zLoss·lse_r)
   * − [col0 + j = t_r]) for valid rows, 0 for rows whose target is ignoreIndex; g = gradOut[0]
   * (a device f32 scalar, the upstream gradient of the loss), lse from step 2. */
  crossEntropyTileBackward(logits: View, targets: View, lse: View, gradOut: View, rows: number, cols: number, col0: number, ignoreIndex: number, gradScale: number, zLoss: number): void;

  // ---- transformer pieces -------------------------------------------------------------------
  /** Rotary embedding on x [batch, seq, heads, headDim] in the Hugging Face "rotate_half" layout
   * (Llama): pairs (i, i + headDim/2), angle = pos · f_i, pos = seq index, where `freq` is either
   * the base theta (f_i = theta^(−2i/headDim)) or the table of the headDim/2 inverse frequencies f_i
   * (scaled RoPE: linear, llama3, ...; float64, rounded to f32 where the backend computes in f32).
   * `inverse` applies the transpose rotation (the backward). */
  rope(x: View, y: View, batch: number, seq: number, heads: number, headDim: number, freq: RopeFreq, inverse: boolean): void;
  /** Causal scaled-dot-product attention. q [B, S, H, D], k and v [B, S, Hkv, D] (grouped-query:
   * head h uses kv head floor(h·Hkv/H)); out [B, S, H, D]; lse [B, H, S] saves the row logsumexp. */
  attention(q: View, k: View, v: View, out: View, lse: View, B: number, S: number, H: number, Hkv: number, D: number, scale: number): void;
  /** Backward of {@link attention}; dq, dk, dv are overwritten. */
  attentionBackward(q: View, k: View, v: View, out: View, lse: View, dout: View, dq: View, dk: View, dv: View, B: number, S: number, H: number, Hkv: number, D: number, scale: number): void;

  // ---- MoE ----------------------------------------------------------------------------------
  /** Top-k over the last axis of x [rows, cols] (k ≤ 8): values (f32) and indices (i32) [rows, k],
   * descending; ties broken by lower index first. */
  topk(x: View, values: View, indices: View, rows: number, cols: number, k: number): void;
  /** out[i, :] = x[idx[i], :] for i < n (idx i32); idx −1 gives a zero row. */
  gatherRows(x: View, idx: View, out: View, n: number, dim: number): void;
  /** out[idx[i], :] += scale_i · x[i, :] for i < n, where scale_i = weights[i] when weights is
   * given (f32), else 1; idx −1 is skipped. Deterministic (i ascending per destination row). */
  scatterAddRows(x: View, idx: View, weights: View | null, out: View, n: number, dim: number): void;
  /** counts[b] = #{i < n : idx[i] == b} for b < bins (u32 out; idx i32; out-of-range ignored). */
  histogram(idx: View, counts: View, n: number, bins: number): void;
  /** The MoE permutation: a stable counting sort of n (token, slot) pairs by expert, on the device
   * and deterministic. idx [n] i32 = expert of pair p (−1 or out of [0, bins) = dropped); pair p
   * belongs to token ⌊p / topK⌋. Writes (all i32): counts [bins] (kept pairs per expert),
   * offsets [bins + 1] (exclusive prefix sum of counts; offsets[bins] = kept total), rowOfPair [n]
   * (row of pair p in expert order, −1 if dropped), tokenOfRow [n] and pairOfRow [n] (for rows
   * r < kept: the token and pair at row r; −1 past kept). Within an expert rows keep pair order.
   * (Megatron-Core `permute`; the histogram + prefix sum + scatter of a counting sort.) */
  moePermute(idx: View, n: number, topK: number, bins: number, counts: View, offsets: View, rowOfPair: View, tokenOfRow: View, pairOfRow: View): void;
  /** The MoE combine, per token in expert order: out[t, :] = (accumulate ? out[t, :] : 0) + Σ over
   * token t's pairs p = t·topK + s with rowOfPair[p] ≥ 0, in ascending row order, of w_p · x[rowOfPair[p], :]
   * (w_p = weights[p], or 1 when weights is null), added one term at a time. x [xRows, dim] f32,
   * rowOfPair i32 [tokens·topK], out [tokens, dim]. Deterministic (no atomics). topK ≤ 8. Also the
   * backward of the dispatch gather (weights null, accumulate into the token gradient). */
  moeCombine(x: View, xRows: number, rowOfPair: View, weights: View | null, out: View, tokens: number, topK: number, dim: number, accumulate: boolean): void;
  /** Gather along the last axis (torch `gather(x, -1, idx)`): out[r, s] = x[r, idx[r, s]] for
   * x [rows, cols] f32, idx and out [rows, k] (idx i32; outside [0, cols) gives 0). The router's
   * chosen probabilities with the choice on the device. */
  gatherAlongRows(x: View, idx: View, out: View, rows: number, cols: number, k: number): void;
  /** Backward of {@link gatherAlongRows}: dx[r, idx[r, s]] += dout[r, s], s ascending per row
   * (deterministic; indices outside [0, cols) skipped). dx [rows, cols], dout [rows, k] f32. */
  scatterAddAlongRows(dout: View, idx: View, dx: View, rows: number, cols: number, k: number): void;

  // ---- optimizer ----------------------------------------------------------------------------
  /** One fused AdamW/Adam step over n elements of flat f32 master params, f32 grads (or 16-bit
   * grads), f32 moments m and v, in place. When `param16` is given (f16 or bf16) the updated
   * params are also written there, rounded to nearest even. */
  adamw(param: View, grad: View, m: View, v: View, param16: View | null, n: number, p: AdamWParams): void;
  /** LAMB's first phase over n elements (DeepSpeed FusedLamb `lamb_cuda_kernel_part1`): with
   * g = grad·gradScale, m ← β1·m + (1−β1)·g, v ← β2·v + (1−β2)·g² in place, and
   * update[i] = m/(√v + eps) + wd·param (√(v + eps) when epsInsideSqrt). param and m, v, update are
   * f32; grad f32 or 16-bit. The caller takes the norms of param and update per tensor and applies
   * p ← p − step_size·trust_ratio·update (core/src/optim/lamb-step.ts). */
  lambUpdate(param: View, grad: View, m: View, v: View, update: View, n: number, p: LambParams): void;
  /** out[0] (f32) = Σ x[i]² over n elements (f32 or 16-bit x), accumulated in f32 per workgroup
   * then summed in fixed order, so the result is deterministic. */
  sumSquares(x: View, out: View, n: number): void;
  /** out[0] (u32) = 1 if any of n elements of x is inf or NaN, else 0. */
  nonFinite(x: View, out: View, n: number): void;
  /** The optimizer's gradient scale from `count` f32 partial sums of squares (of the summed,
   * still loss-scaled gradients) at `partials`, without a host read: with Σ their sum,
   * norm = √Σ / lsDiv and coef = min(1, maxNorm / (norm + 1e-6)) (1 when maxNorm ≤ 0; PyTorch
   * `clip_grad_norm_`), writes out[0..3) = [coef / lsDiv, skip, Σ] as f32, skip = 1 (and scale 0)
   * when Σ is inf or NaN. Feed out[0..2) to {@link AdamWParams.scaleFrom}. */
  clipScale(partials: View, count: number, out: View, p: ClipScaleParams): void;
}
