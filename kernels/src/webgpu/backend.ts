/**
 * `WebGpuBackend`: the {@link Backend} contract (backend.ts) on any standard WebGPU `GPUDevice` —
 * our wgpu-native binding through bun:ffi (`kernels/src/ffi/`), Deno's built-in `navigator.gpu`,
 * or a browser. It speaks only the WebGPU JavaScript API.
 *
 * Ops validate their views on the host, plan their dispatches with the kernel builders of
 * `kernels/src/wgsl/`, and record them into the current command batch (commands.ts); nothing waits
 * until {@link WebGpuBackend.read} or {@link WebGpuBackend.flush}. Whole buffers are bound and
 * element offsets travel as uniforms, which side-steps the 256-byte storage-offset alignment rule.
 * Device errors (validation, out-of-memory, shader compilation) are collected as they are reported
 * and thrown by the next read/flush.
 */
import {
  DTYPE_BYTES,
  type AdamWParams,
  type Backend,
  type BackendInfo,
  type BinaryOp,
  type Buf,
  type ClipScaleParams,
  type DType,
  type HostArray,
  type GroupedMatmulDevSpec,
  type GroupedMatmulSpec,
  type GroupedWeightGradSpec,
  type LambParams,
  type MatmulSpec,
  type MemoryStats,
  type MemTag,
  type RandomFillSpec,
  type ReduceOp,
  type UnaryOp,
  type View,
} from "../backend.ts";
import { bf16FromF32, f16FromF32, f32ToBits } from "../numerics/index.ts";
import { adamwLaunch } from "../wgsl/adamw.ts";
import { clipScaleLaunch } from "../wgsl/clip-scale.ts";
import { lambUpdateLaunch } from "../wgsl/lamb.ts";
import { affineLaunch, axpyLaunch } from "../wgsl/affine.ts";
import { attentionBackwardLaunches, attentionLaunch } from "../wgsl/attention.ts";
import { attentionTiledBackwardLaunches, attentionTiledLaunch, chooseAttentionBlock } from "../wgsl/attention-tiled.ts";
import { attentionFlashBackwardLaunches, attentionFlashLaunch, chooseFlashBlocks, type FlashBlock, flashTileBytes } from "../wgsl/attention-flash.ts";
import { attentionCoopBackwardLaunches, attentionCoopLaunches, coopAttnHeadDimOk, type CoopAttnBlocks, type CoopAttnProblem } from "../wgsl/attention-coop.ts";
import { resolveCoopAttnBlocks } from "./attention-coop-blocks.ts";
import { binaryLaunch, broadcastShapes, planBroadcast } from "../wgsl/binary.ts";
import { crossEntropyLaunch } from "../wgsl/cross-entropy.ts";
import { ceTileBackwardLaunch, ceTileFinishLaunch, ceTileStatsLaunch } from "../wgsl/tiled-cross-entropy.ts";
import { copyCastLaunch, fillLaunch } from "../wgsl/fill-copy-cast.ts";
import { randomFillLaunch } from "../wgsl/random.ts";
import { checkRandomFillSpec } from "../numerics/random-fill.ts";
import { histogramLaunch } from "../wgsl/histogram.ts";
import { matmulExtents } from "../wgsl/matmul.ts";
import { groupedMatmulDevLaunch, groupedWeightGradLaunch } from "../wgsl/grouped-matmul.ts";
import { gatherAlongRowsLaunch, moeCombineLaunch, moePermuteLaunches, permuteScratchWords, scatterAddAlongRowsLaunch } from "../wgsl/moe-permute.ts";
import { type GroupedDevGeometry, groupedDevExtents, groupedDevGeometry, groupedMatmulExtents, groupedMatmulGeometry, groupedWGradExtents, groupedWGradGeometry } from "../grouped-matmul-spec.ts";
import { type MatmulForcedTile, planMatmulFastLaunches } from "../wgsl/matmul-fast-launch.ts";
import { planSplitK, splitKMatmulLaunches } from "../wgsl/matmul-split-k.ts";
import type { MatmulLimits } from "../wgsl/matmul-fast-tiles.ts";
import { layernormBackwardLaunches, layernormLaunch, normChunks, rmsnormBackwardLaunches, rmsnormLaunch } from "../wgsl/norm.ts";
import { nonFiniteLaunch, sumSquaresLaunches, sumSquaresPartials } from "../wgsl/norms-check.ts";
import { reduceLaunches, reduceScratch } from "../wgsl/reduce.ts";
import { ropeInvFreq, ropeLaunch } from "../wgsl/rope.ts";
import { gatherRowsLaunch, gatherRowsRangeLaunch, scatterAddRowsLaunches, scatterScratchWords } from "../wgsl/rows.ts";
import { softmaxBackwardLaunch, softmaxLaunch } from "../wgsl/softmax.ts";
import { topkLaunch } from "../wgsl/topk.ts";
import { unaryBackwardLaunch, unaryLaunch } from "../wgsl/unary.ts";
import { siluMulBackwardLaunch, siluMulLaunch } from "../wgsl/swiglu.ts";
import { addRmsnormBackwardLaunches, addRmsnormLaunch } from "../wgsl/add-rmsnorm.ts";
import { coopMatmulLaunches, coopWork, type CoopScratch } from "../wgsl/matmul-coop-launch.ts";
import { groupedCoopDevBlocks, groupedCoopDevLaunches, groupedCoopWGradBlocks, groupedCoopWGradLaunches } from "../wgsl/grouped-matmul-coop.ts";
import type { CoopTile } from "../wgsl/matmul-coop-tile.ts";
import { resolveTensorCores, type TensorCoreSetup, type TensorCoreVariant } from "./tensor-cores.ts";
import { BufferLedger, GpuBuf } from "./buffers.ts";
import { anySegmented, crosses, forElementBlocks, forRowBlocks, rebase, regionRuns, segStrideOf, type RowArg } from "./segments.ts";
import { matmulSegmented, type MatmulHost } from "./segmented-matmul.ts";
import { copy2dLaunch, shiftI32Launch } from "../wgsl/segment-copy.ts";
import { CommandBatcher } from "./commands.ts";
import { MAX_WORKGROUPS_PER_DIM } from "./constants.ts";
import { openDevice, type OpenDeviceOptions } from "./device.ts";
import { grid2d } from "./grid.ts";
import { assembleWgsl, type AssembledKernel, type Kernel, type Launch } from "./kernel.ts";
import { offersTrustedShaders, PipelineCache, type CachedPipeline } from "./pipelines.ts";
import { GpuProfiler, type KernelTime } from "./profiler.ts";
import { GpuTimeline, type BatchTiming } from "./timeline.ts";
import { RUNTIME } from "../runtime/detect.ts";

/** Whether writes from SharedArrayBuffer views are copied to ordinary memory first (Deno's WebGPU). */
const COPY_SHARED_WRITES = RUNTIME === "deno";

/** Options of {@link WebGpuBackend.create}. */
export interface WebGpuBackendOptions extends OpenDeviceOptions {
  /** Dispatches recorded per command batch before an automatic submit (default 512). */
  maxBatch?: number;
  /** Attention kernels. "auto" (the default): the fused FlashAttention-2-style kernels
   * (wgsl/attention-flash.ts) where a block fits the device's workgroup memory, else the older
   * tiled kernels (wgsl/attention-tiled.ts), else one workgroup per query row (wgsl/attention.ts);
   * "tiled" skips the first; "rows" always uses the last. */
  attention?: "auto" | "tiled" | "rows";
  /** Force blocks of the fused attention kernels (tuning, tests). A forced block is used at every
   * head dim where it fits the device's workgroup memory; elsewhere the default choice
   * (chooseFlashBlocks in wgsl/attention-flash.ts) applies. */
  attentionBlocks?: { fwd?: FlashBlock; dq?: FlashBlock; dkv?: FlashBlock };
  /** Blocks of the tensor-core attention kernels (wgsl/attention-coop.ts; tuning, tests). Default
   * COOP_ATTN_DEFAULT_BLOCKS. Refused at creation when malformed, beyond the device's workgroup
   * limits, or given without `tensorCores`. */
  attentionCoopBlocks?: Partial<CoopAttnBlocks>;
  /** Split K for matmuls whose output has too few tiles to fill the GPU (weight gradients above
   * all; rules in wgsl/matmul-split-k.ts). Default true: on the H200 it took the step's dW shapes
   * from 0.2–0.5 to 0.6–0.8 of cuBLAS (docs/performance.md). Deterministic (no atomics). */
  matmulSplitK?: boolean;
  /** Force the matmul kernel (tuning, benchmarks): `tile` replaces the planner's tile choice for
   * every f32/f16 matmul and grouped matmul (it must fit the device's workgroup limits), `splitK` the split count of
   * batch-1 matmuls of any layout (≤ 1 = never split; applies even with matmulSplitK off). */
  matmulTuning?: MatmulTuning;
  /** Kernel label prefixes (e.g. "mmf_" for the fast matmul) whose WGSL is compiled without naga's
   * runtime checks (bounds clamping, loop bounding) through wgpu-native's
   * `wgpuDeviceCreateShaderModuleTrusted` (webgpu/pipelines.ts). Default
   * {@link DEFAULT_TRUSTED_SHADERS} where the device has that function (our FFI binding), none
   * elsewhere; `[]` compiles every kernel with the checks. An explicit non-empty list needs our
   * wgpu-native binding (TypeError on another WebGPU implementation). */
  trustedShaders?: readonly string[];
  /** Run f32 matmuls on the tensor cores (wgsl/matmul-coop*.ts: each operand scaled by a power of
   * two so its largest finite |x| lies in [2^14, 2^15) and packed into a zero-padded f16 copy
   * (wgsl/matmul-coop-pack.ts), f32 accumulation, result scaled back exactly
   * (wgsl/matmul-coop-scale.ts) — f16's 11-bit precision at any magnitude, so for mixed-precision
   * (bf16/fp16) jobs only; block and split-K per problem, wgsl/matmul-coop-plan.ts) where the
   * output has at least {@link tensorCoreMinBlocks} 128×128 blocks (dense batch-1 products count
   * each block once per K chunk split-K could add: matmul-coop-launch.ts coopWork): dense matmuls
   * (wgsl/matmul-coop-launch.ts) and the MoE grouped products, groupedMatmul / groupedMatmulDev /
   * groupedWeightGrad (wgsl/grouped-matmul-coop.ts); other matmuls keep the FMA path. Needs the
   * `wgpu-cooperative-matrix` feature with a 16×16×16 f16→f32 configuration, i.e. our library
   * (ZEROMOE_WGPU=coop) on a GPU that offers it; `true` makes create throw naming the reason
   * otherwise, "auto" uses them when supported (see {@link WebGpuBackend.tensorCoresStatus}).
   * "emulated" runs the same kernels with the cooperative-matrix builtins replaced by plain WGSL
   * (wgsl/matmul-coop-wgsl.ts `emulate`; any device with shader-f16, a block that fits its
   * workgroup memory): the tiling, staging, scaling and guards of the tensor-core path checked on
   * machines without tensor cores (lavapipe in CI) — for tests, far slower than either real path.
   * Default false. */
  tensorCores?: boolean | "auto" | "emulated";
  /** Fewest 128×128 output blocks for which a matmul runs on the tensor cores (default
   * COOP_MIN_BLOCKS, measured on the H200: below it the FMA kernels are faster); tests set 0 to
   * route every matmul there. A non-negative integer. */
  tensorCoreMinBlocks?: number;
  /** Block shape of the tensor-core kernels (wgsl/matmul-coop-tile.ts). Default
   * DEFAULT_TENSOR_CORE_TILE (webgpu/tensor-cores.ts) where the device's limits admit it, else COOP_DEFAULT_TILE;
   * with "emulated" a block that fits the device's workgroup memory. Throws at creation when a
   * given block is malformed (wgsl/matmul-coop-tile.ts coopTileProblem), does not fit the device,
   * or is given without `tensorCores`. */
  tensorCoreTile?: CoopTile;
  /** Variant of the tensor-core kernels (tuning and benchmarks; wgsl/matmul-coop-launch.ts
   * CoopLaunchConfig): `operands` "packed" (default) or "f32" (the older in-register conversion),
   * `staging` "regs" (default) / "coop" / "none" (wgsl/matmul-coop-wgsl.ts), `vec` 4 or 8 (default)
   * for the "regs" staging of packed operands, `splitK` a forced chunk count for dense batch-1
   * products. Refused at creation without `tensorCores`, or with a value outside these. */
  tensorCoreVariant?: TensorCoreVariant;
  /** Time every dispatch on the GPU with timestamp queries (needs `timestamp-query`; slower: one
   * compute pass per dispatch). Read the totals with {@link WebGpuBackend.profile}. */
  profile?: boolean;
  /** Time every submitted command batch as a whole on the GPU (needs `timestamp-query`; two empty
   * timestamped passes per batch, the batches themselves unchanged): GPU start/end, host submit
   * time, dispatches and the reason of each submit, for finding where the GPU idles
   * (webgpu/timeline.ts). Read with {@link WebGpuBackend.timeline}. */
  timeline?: boolean;
  /** Most bytes of freed buffers kept for reuse by later allocations of the same size
   * (webgpu/buffer-pool.ts): a number is a fixed bound (0 destroys every freed buffer); "auto" (the
   * default) bounds them by the high-water mark of the program's live buffer bytes, at least
   * {@link MIN_AUTO_POOL_BYTES} — a training step's activations stay pooled between steps however
   * large they are, and pooling at most doubles the program's own peak device memory (measured on
   * allocation traces of the mixtral-med structure: 1.5–9 % above it). Pooled bytes are device memory
   * outside the per-tag accounts: `stats().pooledBytes`; a device memory budget releases them
   * before it refuses an allocation ({@link WebGpuBackend.releasePooledBuffers}). */
  bufferPoolBytes?: number | "auto";
  /** Dispatches after which the open command batch is submitted without waiting (at most
   * `maxBatch`): the device starts on a phase's first ops while the host records the rest. Larger
   * values mean fewer submits, later device start. Default {@link DEFAULT_SUBMIT_AFTER} on a
   * hardware adapter; `maxBatch` (no early submit) on a software one (adapter type "cpu": lavapipe
   * runs a submission's work inside `queue.submit` on the calling thread, so there is nothing to
   * overlap and each extra submit only costs host time). */
  submitAfter?: number;
  /** Largest storage binding the backend uses, in bytes (default: the device's, min of
   * maxBufferSize and maxStorageBufferBindingSize). A buffer of more elements than fit one binding
   * of a 4-byte dtype is held in several GPUBuffers ("segments", webgpu/buffers.ts) that every op
   * splits its work over (webgpu/segments.ts, docs/kernels.md "Tensors larger than one binding").
   * Lower it to exercise segmentation at small sizes (tests on lavapipe); values above the
   * device's limit are clamped to it. At least 16. The environment variable
   * ZEROMOE_MAX_BINDING_BYTES sets it for a whole run (kernels/src/select.ts). */
  maxBindingBytes?: number;
}

/** {@link WebGpuBackend.stats}: counters since the backend was created. */
export interface WebGpuStats {
  dispatches: number;
  submits: number;
  pipelines: number;
  /** Host ms spent compiling those pipelines (WGSL → shader module → compute pipeline). */
  pipelineMs: number;
  bindGroupHits: number;
  bindGroupMisses: number;
  /** Host reads (`read`), each a wait for the device. */
  reads: number;
  /** Waits for the whole queue (`flush`). */
  waits: number;
  /** Milliseconds the host spent awaiting reads and waits. */
  waitMs: number;
  /** GPU buffers created through the ledger (`alloc` and scratch growth; staging buffers excluded). */
  buffersCreated: number;
  /** Allocations served from the pool of freed buffers instead. */
  buffersReused: number;
  /** Bytes of freed buffers held for reuse now (device memory outside the per-tag accounts). */
  pooledBytes: number;
  /** Allocations held in several GPU buffers because they exceed one binding (webgpu/buffers.ts
   * segments). */
  segmentedAllocs: number;
  /** Host ms spent creating those GPU buffers (`createBuffer`). */
  createMs: number;
  /** Freed GPU buffers destroyed (not kept: the pool was full), and the host ms spent doing it. */
  buffersDestroyed: number;
  destroyMs: number;
  /** Bytes of reused buffers zeroed by clears (the `alloc` contract: zeros) — GPU work outside any
   * kernel, invisible to the per-kernel profile. */
  clearedBytes: number;
  /** Host ms spent submitting batches (pass end, encoder finish, uniform upload, `queue.submit`). */
  submitMs: number;
  /** High-water mark of the bytes of live (allocated, not freed) GPU buffers since creation, padded
   * sizes; the adaptive pool's bound. */
  maxLiveBytes: number;
}

/** {@link WebGpuBackendOptions.matmulTuning}. */
export interface MatmulTuning {
  tile?: MatmulForcedTile;
  splitK?: number;
}

/** Default {@link WebGpuBackendOptions.submitAfter}. */
export const DEFAULT_SUBMIT_AFTER = 32;

/** Least bound of the adaptive buffer pool ({@link WebGpuBackendOptions.bufferPoolBytes} "auto"):
 * 1 GiB. (A fixed 1 GiB was the default before: at mixtral-med it destroyed and re-created 232
 * buffers per step, 106–155 ms of host time in createBuffer, with the GPU idle ~70 ms of a 450 ms
 * step; docs/performance.md "Third pass: where the step idled".) */
export const MIN_AUTO_POOL_BYTES = 1 << 30;

/** Kernels compiled without naga's runtime checks by default where the binding can
 * ({@link WebGpuBackendOptions.trustedShaders}): the fused flash-attention kernels, every index of
 * which is guarded in the WGSL and tested bit-identical to their checked compilation
 * (kernels/test/webgpu/attention.test.ts); on the H200 they ran 1.24× faster so (forward +
 * backward per mixtral-med layer 5.87 → 4.75 ms, docs/performance.md "Flash attention: register
 * prefetch, heavy blocks first, trusted compilation"); and the tensor-core matmuls ("mmc_",
 * wgsl/matmul-coop-wgsl.ts: every global read is guarded by select, every workgroup index in range
 * by construction; the H200's fastest coop measurement, 155 TFLOP/s at 4096³, was trusted). The FMA
 * matmuls are not listed: trusted compilation measured a median 0.99× there. The tensor-core
 * attention ("attention_coop_", wgsl/attention-coop.ts) reads fragments only inside its
 * zero-padded packed copies (the padding covers every block it can touch), guards its lse/Δ reads
 * and stores by the sequence length, and indexes workgroup memory in range by construction; its
 * tests also run checked (kernels/test/webgpu/attention-coop.test.ts). */
export const DEFAULT_TRUSTED_SHADERS: readonly string[] = ["attention_flash_", "mmc_", "attention_coop_"];

const FLOATS: readonly DType[] = ["f32", "f16", "bf16"];
const F32: readonly DType[] = ["f32"];
const I32: readonly DType[] = ["i32"];

/** The webgpu {@link Backend}. Create with {@link WebGpuBackend.create}. */
export class WebGpuBackend implements Backend {
  readonly info: BackendInfo;
  private readonly ledger: BufferLedger;
  private readonly pipelines: PipelineCache;
  private readonly batcher: CommandBatcher;
  private readonly maxPerDim: number;
  /** The device limits that bound the matmul tile choice (read once). */
  private readonly matmulLimits: MatmulLimits;
  private readonly errors: string[] = [];
  private readonly pendingChecks: Promise<void>[] = [];
  private readonly scratch = new Map<string, GpuBuf>();
  private readonly ropeTables = new Map<string, GpuBuf>();
  private lost: string | null = null;

  /** The backend as {@link SegmentHost}: what segment splitting (webgpu/segments.ts) calls. */
  private readonly host: MatmulHost = {
    alloc: (d, n, t, c) => this.alloc(d, n, t, c),
    free: (b) => this.free(b),
    copy: (a, b, n) => this.copy(a, b, n),
    checkView: (v, n, op, arg, d) => void this.ledger.check(v, n, op, arg, d),
    segElems: () => this.ledger.segElems,
    matmul: (a, b, o, sp) => this.matmul(a, b, o, sp),
    copy2d: (a, sl, b, dl, r, c) => this.copy2d(a, sl, b, dl, r, c),
  };

  private constructor(
    readonly device: GPUDevice,
    readonly adapter: GPUAdapter,
    info: BackendInfo,
    maxBatch: number,
    private attentionMode: "auto" | "tiled" | "rows",
    trustedShaders: readonly string[] = [],
    maxBindingBytes?: number,
  ) {
    this.info = info;
    const lim = device.limits;
    this.ledger = new BufferLedger(
      device,
      Math.min(lim.maxBufferSize, lim.maxStorageBufferBindingSize),
      (p) => {
        this.pendingChecks.push(
          p.then((msg) => {
            if (msg) this.errors.push(msg);
          }),
        );
      },
      (bytes, zero) => this.batcher.reuse(bytes, zero),
      maxBindingBytes,
    );
    this.pipelines = new PipelineCache(device, trustedShaders);
    this.batcher = new CommandBatcher(device, maxBatch);
    this.maxPerDim = lim.maxComputeWorkgroupsPerDimension ?? MAX_WORKGROUPS_PER_DIM;
    this.matmulLimits = { maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup };
    const onError = (ev: Event): void => {
      const e = (ev as GPUUncapturedErrorEvent).error;
      this.errors.push(e?.message ?? String(ev));
    };
    const target = device as unknown as { addEventListener?: (t: string, f: (e: Event) => void) => void };
    if (typeof target.addEventListener === "function") target.addEventListener("uncapturederror", onError);
    else (device as unknown as { onuncapturederror: unknown }).onuncapturederror = onError;
    device.lost?.then((i) => {
      this.lost = `${i.reason}: ${i.message}`;
    });
  }

  /**
   * Open an adapter/device on `gpu` (requesting the adapter's limits and the shader-f16 /
   * timestamp-query features when offered) and build a backend on it. Throws when no adapter or
   * device is available (message says which step).
   */
  static async create(gpu: GPU, opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
    const { adapter, device, info } = await openDevice(gpu, opts);
    const trusted = opts.trustedShaders ?? (offersTrustedShaders(device) ? DEFAULT_TRUSTED_SHADERS : []);
    if (opts.maxBindingBytes !== undefined && !(Number.isInteger(opts.maxBindingBytes) && opts.maxBindingBytes >= 16)) throw new Error(`webgpu: maxBindingBytes must be an integer ≥ 16, got ${opts.maxBindingBytes}`);
    const be = new WebGpuBackend(device, adapter, info, opts.maxBatch ?? 512, opts.attention ?? "auto", trusted, opts.maxBindingBytes);
    if (opts.profile) be.batcher.profiler = new GpuProfiler(device, opts.maxBatch ?? 512);
    if (opts.timeline) be.batcher.timeline = new GpuTimeline(device);
    const poolBytes = opts.bufferPoolBytes ?? "auto";
    if (poolBytes === "auto") {
      be.batcher.pool.capacity = Number.POSITIVE_INFINITY;
      be.batcher.pool.limit = () => Math.max(MIN_AUTO_POOL_BYTES, be.ledger.maxLiveBytes);
    } else {
      if (!(Number.isFinite(poolBytes) && poolBytes >= 0)) throw new Error(`webgpu: bufferPoolBytes must be "auto" or a number ≥ 0, got ${poolBytes}`);
      be.batcher.pool.capacity = poolBytes;
    }
    const submitAfter = opts.submitAfter ?? (info.adapterType === "cpu" ? be.batcher.maxBatch : DEFAULT_SUBMIT_AFTER);
    if (!(Number.isInteger(submitAfter) && submitAfter >= 1)) throw new Error(`webgpu: submitAfter must be an integer ≥ 1, got ${submitAfter}`);
    be.batcher.submitAfter = Math.min(submitAfter, be.batcher.maxBatch);
    be.attentionBlocks = opts.attentionBlocks ?? {};
    be.splitK = opts.matmulSplitK ?? true;
    be.matmulTuning = opts.matmulTuning ?? {};
    let tc: TensorCoreSetup;
    try {
      tc = resolveTensorCores(adapter, device, opts);
    } catch (e) {
      be.destroy();
      throw e;
    }
    be.coop = tc.coop;
    be.tensorCoresStatus = tc.status;
    try {
      be.coopAttnBlocks = resolveCoopAttnBlocks(device, opts);
    } catch (e) {
      be.destroy();
      throw e;
    }
    return be;
  }

  /** GPU time per kernel label since creation (or {@link WebGpuBackend.resetProfile}), longest
   * first; submits and waits for recorded work. Throws unless created with `profile: true`. */
  async profile(): Promise<KernelTime[]> {
    const p = this.batcher.profiler;
    if (!p) throw new Error("webgpu profile: create the backend with { profile: true } to time kernels");
    await this.flush();
    return p.report();
  }

  /** Switch kernel choices after creation (benchmarks comparing kernels on one model); the same
   * meaning as the creation options of those names. */
  setKernelOptions(o: { attention?: "auto" | "tiled" | "rows"; matmulSplitK?: boolean; matmulTuning?: MatmulTuning }): void {
    if (o.attention) this.attentionMode = o.attention;
    if (o.matmulSplitK !== undefined) this.splitK = o.matmulSplitK;
    if (o.matmulTuning !== undefined) this.matmulTuning = o.matmulTuning;
  }

  /** Forget the profile totals gathered so far. */
  resetProfile(): void {
    this.batcher.profiler?.reset();
  }

  /** Every command batch submitted since creation (or {@link WebGpuBackend.resetTimeline}), in
   * submission order, with GPU start/end timestamps (webgpu/timeline.ts); submits and waits for
   * recorded work. Throws unless created with `timeline: true`. */
  async timeline(): Promise<BatchTiming[]> {
    const t = this.batcher.timeline;
    if (!t) throw new Error("webgpu timeline: create the backend with { timeline: true } to time batches");
    await this.flush();
    return t.report();
  }

  /** Forget the batches timed so far (the next {@link WebGpuBackend.timeline} starts after this). */
  resetTimeline(): void {
    this.batcher.timeline?.reset();
  }

  /** Counters since creation, for reports and tests: dispatches recorded, command batches
   * submitted, pipelines compiled, bind-group cache hits/misses, host reads (`read`: each waits for
   * the device), waits for an idle queue (`flush`), GPU buffers created (`alloc`). */
  stats(): WebGpuStats {
    const b = this.batcher;
    return { dispatches: b.dispatches, submits: b.submits, pipelines: this.pipelines.size, pipelineMs: this.pipelines.compileMs, bindGroupHits: b.bindGroups.hits, bindGroupMisses: b.bindGroups.misses, reads: b.reads, waits: b.waits, waitMs: b.waitMs, buffersCreated: this.ledger.creates, segmentedAllocs: this.ledger.segmentedAllocs, buffersReused: b.pool.reuses, pooledBytes: b.pool.bytes, createMs: this.ledger.createMs, buffersDestroyed: b.destroyed, destroyMs: b.destroyMs, clearedBytes: b.clearedBytes, submitMs: b.submitMs, maxLiveBytes: this.ledger.maxLiveBytes };
  }

  /** Elements per segment: a buffer of more elements is held in several GPUBuffers
   * ({@link WebGpuBackendOptions.maxBindingBytes}); the same count for every dtype. */
  get segmentElems(): number {
    return this.ledger.segElems;
  }

  /** Bytes of freed buffers held for reuse now (`stats().pooledBytes` without building the whole
   * stats object: a device memory budget asks on every allocation). */
  pooledBytes(): number {
    return this.batcher.pool.bytes;
  }

  /** Destroy every pooled GPU buffer (freed by the program, kept for reuse: `stats().pooledBytes`)
   * and return the bytes released. A device memory budget calls this before it refuses an
   * allocation (core/src/train/device-budget.ts), so pooled memory never takes a budget's room. */
  releasePooledBuffers(): number {
    return this.batcher.releasePool();
  }

  /** Release the device (the backend is unusable afterwards). */
  destroy(): void {
    this.batcher.submit();
    this.batcher.destroy();
    this.device.destroy();
  }

  // ---- plumbing ------------------------------------------------------------------------------

  /** Assembled source + pipeline per kernel object and aliasing pattern of its buffers. */
  private readonly compiled = new WeakMap<Kernel, Map<string, { asm: AssembledKernel; pipe: CachedPipeline; types: ("u32" | "i32" | "f32")[] }>>();

  private run(l: Launch | null): void {
    if (!l) return;
    const gbufs = l.bufs as readonly GpuBuf[];
    // aliasing pattern: for each bound buffer, the index of its first occurrence
    let pattern = "";
    for (let i = 0; i < gbufs.length; i++) {
      let f = i;
      for (let j = 0; j < i; j++) {
        if (gbufs[j] === gbufs[i]) {
          f = j;
          break;
        }
      }
      pattern += `${f},`;
    }
    let perKernel = this.compiled.get(l.kernel);
    if (!perKernel) {
      perKernel = new Map();
      this.compiled.set(l.kernel, perKernel);
    }
    let entry = perKernel.get(pattern);
    const label = l.kernel.label;
    if (!entry) {
      const asm = assembleWgsl(l.kernel, gbufs.map((b) => b.id));
      let pipe = this.pipelines.lookup(asm.source);
      if (!pipe) {
        // first use: compile under an error scope so WGSL errors name the kernel
        this.device.pushErrorScope("validation");
        pipe = this.pipelines.get(label, asm);
        this.pendingChecks.push(
          this.device.popErrorScope().then((e) => {
            if (e) this.errors.push(`kernel ${label} (pipeline creation): ${e.message}`);
          }),
        );
      }
      entry = { asm, pipe, types: l.kernel.params.map((d) => d.type) };
      perKernel.set(pattern, entry);
    }
    const { asm, pipe, types } = entry;
    const storage: GPUBuffer[] = [];
    const ids: number[] = [];
    asm.slotOf.forEach((slot, i) => {
      if (storage[slot] === undefined) {
        storage[slot] = gbufs[i]!.gpu!;
        ids[slot] = this.batcher.idOf(storage[slot]!);
      }
    });
    const grid: [number, number, number] = typeof l.workgroups === "number" ? grid2d(l.workgroups, this.maxPerDim) : [l.workgroups[0], l.workgroups[1], l.workgroups[2]];
    for (const g of grid) if (g > this.maxPerDim) throw new Error(`webgpu ${label}: grid ${grid} exceeds ${this.maxPerDim} workgroups per dimension`);
    this.batcher.dispatch(label, pipe, storage, ids, l.params, types, grid);
  }

  private runAll(ls: readonly Launch[]): void {
    for (const l of ls) this.run(l);
  }

  private async checkErrors(): Promise<void> {
    if (this.pendingChecks.length > 0) await Promise.all(this.pendingChecks.splice(0));
    if (this.lost) throw new Error(`webgpu: device lost (${this.lost})`);
    if (this.errors.length > 0) {
      const msg = this.errors.splice(0).join("\n");
      throw new Error(`webgpu: device reported errors:\n${msg}`);
    }
  }

  private v(view: View, n: number, op: string, arg: string, dtypes?: readonly DType[]): GpuBuf {
    return this.ledger.view(view, n, op, arg, dtypes);
  }

  /** A scratch buffer of at least `length` elements (tag `other`), grown on demand. */
  private scratchBuf(name: string, dtype: DType, length: number): GpuBuf {
    const cur = this.scratch.get(name);
    if (cur && cur.length >= length) return cur;
    if (cur) this.free(cur);
    const b = this.ledger.alloc(dtype, Math.max(length, cur ? cur.length * 2 : 0), "other");
    this.scratch.set(name, b);
    return b;
  }

  /** Views of an op that does not split its operands across bindings, each rebased onto the one
   * segment holding it (webgpu/segments.ts `rebase`); validates each first and throws, naming the
   * op, operand and range, when one crosses a segment boundary. */
  private one(op: string, ...items: [View, number, string, (readonly DType[])?][]): View[] {
    return items.map(([v, n, arg, d]) => {
      this.ledger.check(v, n, op, arg, d);
      return rebase(v, n, op, arg);
    });
  }

  /** binary on segmented operands: elementwise blocks when no operand broadcasts, else row blocks
   * along the broadcast shape's leading (non-1) axis, a broadcast operand bound whole. */
  private binarySegmented(op: BinaryOp, a: View, aShape: readonly number[], b: View, bShape: readonly number[], out: View): void {
    const os = broadcastShapes(aShape, bShape);
    const prod = (d: readonly number[]): number => d.reduce((p, x) => p * x, 1);
    const total = prod(os);
    const na = prod(aShape);
    const nb = prod(bShape);
    const name = `binary ${op}`;
    if (na === total && nb === total) return forElementBlocks(this.host, name, total, [{ view: a, io: "in", arg: "a", dtypes: F32 }, { view: b, io: "in", arg: "b", dtypes: F32 }, { view: out, io: "out", arg: "out", dtypes: F32 }], [], (_s, c, [as, bs, o]) => this.binary(op, as!, [c], bs!, [c], o!));
    const r = os.length;
    const pad = (d: readonly number[]): number[] => [...new Array<number>(r - d.length).fill(1), ...d];
    const ap = pad(aShape);
    const bp = pad(bShape);
    let k = 0;
    while (k < r - 1 && os[k] === 1) k++;
    const rows = os[k]!;
    const inner = total / Math.max(rows, 1);
    const split = (p: number[]): boolean => p[k] === rows && rows !== 1;
    const sa = split(ap);
    const sb = split(bp);
    if ((!sa && crosses(a, na)) || (!sb && crosses(b, nb))) {
      // a broadcast operand itself crosses a boundary: one sub-problem per leading index, on the
      // trailing shape (which splits again where it must)
      this.ledger.check(out, total, name, "out", F32);
      const ia = sa ? na / rows : 0;
      const ib = sb ? nb / rows : 0;
      for (let i = 0; i < rows; i++) this.binary(op, { buf: a.buf, off: a.off + i * ia }, ap.slice(k + 1), { buf: b.buf, off: b.off + i * ib }, bp.slice(k + 1), { buf: out.buf, off: out.off + i * inner });
      return;
    }
    const args: RowArg[] = [{ view: out, perRow: inner, io: "out", arg: "out", dtypes: F32 }];
    const fixed: { view: View; n: number; arg: string; dtypes: readonly DType[] }[] = [];
    if (sa) args.push({ view: a, perRow: prod(ap.slice(k + 1)), io: "in", arg: "a", dtypes: F32 });
    else fixed.push({ view: a, n: na, arg: "a", dtypes: F32 });
    if (sb) args.push({ view: b, perRow: prod(bp.slice(k + 1)), io: "in", arg: "b", dtypes: F32 });
    else fixed.push({ view: b, n: nb, arg: "b", dtypes: F32 });
    forRowBlocks(this.host, name, rows, args, fixed, (_r, c, views, fv) => {
      const o = views[0]!;
      const av = sa ? views[1]! : fv[0]!;
      const bv = sb ? views[sa ? 2 : 1]! : fv[sa ? 0 : 1]!;
      const shape = (p: number[], s: boolean): number[] => [s ? c : 1, ...p.slice(k + 1)];
      this.binary(op, av, shape(ap, sa), bv, shape(bp, sb), o);
    });
  }

  /** One outer slice [n, inner] of a reduce that crosses a segment boundary: partial reductions of
   * row blocks of n (per segment), then the reduction of the partials (sum for sum/mean/sumsq, max
   * for max; mean divides by n last), into a temporary copied to `out` (inner elements). */
  private reduceSlice(op: ReduceOp, x: View, out: View, n: number, inner: number): void {
    const name = `reduce ${op}`;
    const blocks: View[] = [];
    const counts: number[] = [];
    const temps: Buf[] = [];
    forRowBlocks(this.host, name, n, [{ view: x, perRow: inner, io: "in", arg: "x", dtypes: F32 }], [], (_r, c, [xs]) => {
      blocks.push(xs!);
      counts.push(c);
    }, (r) => {
      const t = this.alloc("f32", inner, "other", "any");
      temps.push(t);
      this.copy({ buf: x.buf, off: x.off + r * inner }, { buf: t, off: 0 }, inner);
      blocks.push({ buf: t, off: 0 });
      counts.push(1);
    });
    const part = this.alloc("f32", blocks.length * inner, "other", "any");
    const first = op === "mean" ? "sum" : op;
    blocks.forEach((bv, i) => this.reduce(first, bv, { buf: part, off: i * inner }, 1, counts[i]!, inner));
    const res = this.alloc("f32", inner, "other", "any");
    this.reduce(op === "max" ? "max" : "sum", { buf: part, off: 0 }, { buf: res, off: 0 }, 1, blocks.length, inner);
    if (op === "mean") this.affine({ buf: res, off: 0 }, { buf: res, off: 0 }, inner, 1 / n, 0);
    this.copy({ buf: res, off: 0 }, out, inner);
    for (const t of [...temps, part, res]) this.free(t);
  }

  /** Strided 2-D copy of 32-bit elements (wgsl/copy2d.ts), split over segments by row blocks. */
  private copy2d(src: View, sld: number, dst: View, dld: number, rows: number, cols: number): void {
    if (anySegmented(src, dst)) {
      const args: RowArg[] = [
        { view: src, perRow: cols, ld: sld, io: "in", arg: "src" },
        { view: dst, perRow: cols, ld: dld, io: "out", arg: "dst" },
      ];
      return forRowBlocks(this.host, "copy2d", rows, args, [], (_r, c, [s, d]) => this.copy2d(s!, sld, d!, dld, c, cols));
    }
    const ext = (ld: number): number => (rows > 0 ? (rows - 1) * ld + cols : 0);
    const sb = this.v(src, ext(sld), "copy2d", "src");
    const db = this.v(dst, ext(dld), "copy2d", "dst");
    this.run(copy2dLaunch(sb, src.off, sld, db, dst.off, dld, rows, cols));
  }

  /** Run `fn` with a temporary i32 copy of `n` offsets at `offsets` shifted by −shift. */
  private withShiftedOffsets(offsets: View, n: number, shift: number, fn: (v: View) => void): void {
    const t = this.ledger.alloc("i32", n, "other", false);
    this.run(shiftI32Launch(this.v(offsets, n, "offsets", "offsets", I32), offsets.off, t, 0, n, shift));
    fn({ buf: t, off: 0 });
    this.free(t);
  }

  /** Run `fn` per run of groups whose `perGroup` elements (groups `stride` apart from `v`) lie in
   * one segment, with the view of the run's first group rebased; a group straddling a boundary
   * runs alone on a temporary copied in (`io` "in"/"inout") and back ("out"/"inout"). */
  private groupRuns(op: string, v: View, G: number, perGroup: number, stride: number, io: "in" | "out" | "inout", fn: (g0: number, count: number, view: View) => void): void {
    forRowBlocks(this.host, op, G, [{ view: v, perRow: perGroup, ld: stride, io, arg: op === "groupedWeightGrad" ? "dw" : "w", dtypes: F32 }], [], (g0, c, [gv]) => fn(g0, c, gv!));
  }

  /** groupedMatmul (host offsets) with a segmented operand: runs of groups whose weights lie in one
   * segment when x and out each lie in one, else one matmul per non-empty group (split itself). */
  private groupedMatmulSegmented(x: View, w: View, out: View, spec: GroupedMatmulSpec): void {
    const g = groupedMatmulGeometry(spec, "webgpu");
    const ext = groupedMatmulExtents(g);
    const op = "groupedMatmul";
    this.ledger.check(x, ext.x, op, "x", F32);
    this.ledger.check(w, ext.w, op, "w", F32);
    this.ledger.check(out, ext.out, op, "out", F32);
    if (g.R === 0 || g.N === 0) return;
    if (!crosses(x, ext.x) && !crosses(out, ext.out)) {
      const xs = rebase(x, ext.x, op, "x");
      const os = rebase(out, ext.out, op, "out");
      return this.groupRuns(op, w, g.G, g.N * g.K, g.strideW, "in", (g0, cnt, wv) => {
        const offs = g.offsets.slice(g0, g0 + cnt + 1);
        const base = offs[0]!;
        if (offs[cnt]! === base) return;
        const sub: GroupedMatmulSpec = { offsets: offs.map((o) => o - base), N: g.N, K: g.K, transB: g.transB, strideW: g.strideW, accumulate: g.accumulate };
        this.groupedMatmul({ buf: xs.buf, off: xs.off + base * g.K }, wv, { buf: os.buf, off: os.off + base * g.N }, sub);
      });
    }
    for (let i = 0; i < g.G; i++) {
      const r0 = g.offsets[i]!;
      const rows = g.offsets[i + 1]! - r0;
      if (rows > 0) this.matmul({ buf: x.buf, off: x.off + r0 * g.K }, { buf: w.buf, off: w.off + i * g.strideW }, { buf: out.buf, off: out.off + r0 * g.N }, { M: rows, N: g.N, K: g.K, transB: g.transB, accumulate: g.accumulate });
    }
  }

  /** embedding / gatherRows with a segmented operand: row blocks of (ids, out); in each, out is
   * zeroed, then every run of table rows in one segment gathers the ids that fall in it
   * (wgsl/rows.ts gatherRowsRangeLaunch; a straddling table row from a one-row temporary).
   * Copies only, so bit-identical to one binding. */
  private gatherSegmented(op: string, table: View, ids: View, out: View, n: number, dim: number): void {
    this.ledger.check(table, 0, op, "table", F32);
    const rows = dim > 0 ? Math.floor((table.buf.length - table.off) / dim) : 0;
    const args: RowArg[] = [
      { view: ids, perRow: 1, io: "in", arg: "ids", dtypes: I32 },
      { view: out, perRow: dim, io: "out", arg: "out", dtypes: F32 },
    ];
    const runs = regionRuns(table.off, rows, dim, dim, segStrideOf(table));
    forRowBlocks(this.host, op, n, args, [], (_r, c, [is, os]) => {
      const ib = this.v(is!, c, op, "ids", I32);
      const ob = this.v(os!, c * dim, op, "out", F32);
      this.run(fillLaunch(ob, os!.off, c * dim, 0));
      for (const run of runs) {
        const cnt = run.r1 - run.r0;
        const src: View = { buf: table.buf, off: table.off + run.r0 * dim };
        if (!run.seam) {
          const tv = rebase(src, cnt * dim, op, "table");
          this.run(gatherRowsRangeLaunch(this.v(tv, cnt * dim, op, "table", F32), tv.off, run.r0, cnt, ib, is!.off, ob, os!.off, c, dim));
          continue;
        }
        const t = this.ledger.alloc("f32", dim, "other", false);
        this.copy(src, { buf: t, off: 0 }, dim);
        this.run(gatherRowsRangeLaunch(t, 0, run.r0, 1, ib, is!.off, ob, os!.off, c, dim));
        this.free(t);
      }
    });
  }

  /** scatterAddRows / embeddingBackward with a segmented operand: row blocks of (x, idx, weights)
   * in ascending order; in each, every run of destination rows in one segment adds the rows whose
   * index falls in it (the scatter kernels with a destination base, wgsl/rows.ts; a straddling
   * destination row through a one-row temporary). Each destination row still adds its sources in
   * ascending i, starting from its value: bit-identical to one binding. */
  private scatterSegmented(op: string, x: View, idx: View, weights: View | null, out: View, n: number, dim: number): void {
    this.ledger.check(out, 0, op, "out", F32);
    const outRows = dim > 0 ? Math.floor((out.buf.length - out.off) / dim) : 0;
    if (n === 0 || dim === 0) return;
    const args: RowArg[] = [
      { view: x, perRow: dim, io: "in", arg: "x", dtypes: F32 },
      { view: idx, perRow: 1, io: "in", arg: "idx", dtypes: I32 },
    ];
    if (weights) args.push({ view: weights, perRow: 1, io: "in", arg: "weights", dtypes: F32 });
    const runs = regionRuns(out.off, outRows, dim, dim, segStrideOf(out));
    forRowBlocks(this.host, op, n, args, [], (_r, c, [xs, is, ws]) => {
      const xb = this.v(xs!, c * dim, op, "x", F32);
      const ib = this.v(is!, c, op, "idx", I32);
      const wb = ws ? this.v(ws, c, op, "weights", F32) : null;
      for (const run of runs) {
        const cnt = run.r1 - run.r0;
        const dst: View = { buf: out.buf, off: out.off + run.r0 * dim };
        const scratch = this.scratchBuf("scatter_order", "u32", scatterScratchWords(c));
        if (!run.seam) {
          const ov = rebase(dst, cnt * dim, op, "out");
          this.runAll(scatterAddRowsLaunches(xb, xs!.off, ib, is!.off, wb, ws?.off ?? 0, this.v(ov, cnt * dim, op, "out", F32), ov.off, cnt, c, dim, scratch, run.r0));
          continue;
        }
        const t = this.ledger.alloc("f32", dim, "other", false);
        this.copy(dst, { buf: t, off: 0 }, dim);
        this.runAll(scatterAddRowsLaunches(xb, xs!.off, ib, is!.off, wb, ws?.off ?? 0, t, 0, 1, c, dim, scratch, run.r0));
        this.copy({ buf: t, off: 0 }, dst, dim);
        this.free(t);
      }
    });
  }

  // ---- memory --------------------------------------------------------------------------------

  /** Backend.alloc; with `contents` "any" a recycled buffer is handed out without its zeroing clear
   * (a fresh one is zeroed by WebGPU anyway). */
  alloc(dtype: DType, length: number, tag: MemTag, contents: "zeros" | "any" = "zeros"): Buf {
    return this.ledger.alloc(dtype, length, tag, contents === "zeros");
  }

  free(buf: Buf): void {
    for (const g of this.ledger.freeDeferred(buf)) this.batcher.recycle(g);
  }

  retag(buf: Buf, tag: MemTag): void {
    this.ledger.retag(buf, tag);
  }

  memory(): MemoryStats {
    return this.ledger.memory();
  }

  resetPeak(): void {
    this.ledger.resetPeak();
  }

  // ---- transfer ------------------------------------------------------------------------------

  write(dst: View, data: HostArray): void {
    if (anySegmented(dst)) return forElementBlocks(this.host, "write", data.length, [{ view: dst, io: "out", arg: "dst" }], [], (s0, c, [d]) => this.write(d!, data.subarray(s0, s0 + c)));
    const n = data.length;
    const b = this.v(dst, n, "write", "dst");
    let bytes: ArrayBufferView;
    switch (b.dtype) {
      case "f32":
        if (data instanceof Float32Array) bytes = data;
        else if (data instanceof Float64Array) bytes = Float32Array.from(data);
        else throw new Error(`webgpu write: f32 buffer needs a Float32Array or Float64Array, got ${data.constructor.name}`);
        break;
      case "f16":
      case "bf16":
        if (!(data instanceof Uint16Array)) throw new Error(`webgpu write: ${b.dtype} buffer needs a Uint16Array of raw bits, got ${data.constructor.name}`);
        bytes = data;
        break;
      case "i32":
        if (!(data instanceof Int32Array)) throw new Error(`webgpu write: i32 buffer needs an Int32Array, got ${data.constructor.name}`);
        bytes = data;
        break;
      case "u32":
        if (!(data instanceof Uint32Array)) throw new Error(`webgpu write: u32 buffer needs a Uint32Array, got ${data.constructor.name}`);
        bytes = data;
        break;
    }
    if (n === 0) return;
    const eb = DTYPE_BYTES[b.dtype];
    const gpu = b.gpu!;
    if (eb === 4 || (dst.off % 2 === 0 && n % 2 === 0)) {
      this.batcher.beforeWrite(gpu, dst.off * eb, n * eb);
      // Deno's navigator.gpu refuses shared memory as writeBuffer data ("data must be an
      // ArrayBuffer or ArrayBufferView"): there a view of a SharedArrayBuffer is copied first
      if (COPY_SHARED_WRITES && bytes.buffer instanceof SharedArrayBuffer) bytes = new Uint8Array(bytes.buffer, bytes.byteOffset, n * eb).slice();
      this.device.queue.writeBuffer(gpu, dst.off * eb, bytes.buffer, bytes.byteOffset, n * eb);
      return;
    }
    // 16-bit range not aligned to whole words: stage in a temporary buffer, then a word-wise copy
    // kernel merges it without touching the neighbouring halves.
    const tmp = this.ledger.alloc(b.dtype, n, "other");
    const padded = new Uint16Array(n + (n % 2));
    padded.set(data as Uint16Array);
    this.batcher.beforeWrite(tmp.gpu!, 0, padded.byteLength);
    this.device.queue.writeBuffer(tmp.gpu!, 0, padded.buffer, 0, padded.byteLength);
    this.run(copyCastLaunch(tmp, 0, b, dst.off, n));
    this.free(tmp);
  }

  async read(src: View, n: number): Promise<HostArray> {
    if (anySegmented(src)) {
      const parts: Promise<HostArray>[] = [];
      const starts: number[] = [];
      forElementBlocks(this.host, "read", n, [{ view: src, io: "in", arg: "src" }], [], (s0, c, [v]) => {
        starts.push(s0);
        parts.push(this.read(v!, c));
      });
      const got = await Promise.all(parts);
      const d = src.buf.dtype;
      const out = d === "f32" ? new Float32Array(n) : d === "i32" ? new Int32Array(n) : d === "u32" ? new Uint32Array(n) : new Uint16Array(n);
      got.forEach((g, i) => out.set(g as never, starts[i]!));
      return out;
    }
    const b = this.v(src, n, "read", "src");
    const eb = DTYPE_BYTES[b.dtype];
    const start = src.off * eb;
    const end = (src.off + n) * eb;
    const a0 = Math.floor(start / 4) * 4;
    const a1 = Math.ceil(end / 4) * 4;
    const raw = await this.batcher.readBytes(b.gpu!, a0, a1 - a0);
    await this.checkErrors();
    const at = start - a0;
    switch (b.dtype) {
      case "f32":
        return new Float32Array(raw, at, n);
      case "i32":
        return new Int32Array(raw, at, n);
      case "u32":
        return new Uint32Array(raw, at, n);
      default:
        return new Uint16Array(raw, at, n);
    }
  }

  async flush(): Promise<void> {
    await this.batcher.finish();
    await this.checkErrors();
  }

  // ---- basic ---------------------------------------------------------------------------------

  fill(dst: View, value: number, n: number): void {
    if (anySegmented(dst)) return forElementBlocks(this.host, "fill", n, [{ view: dst, io: "out", arg: "dst" }], [], (_s, c, [d]) => this.fill(d!, value, c));
    const b = this.v(dst, n, "fill", "dst");
    if (n === 0) return;
    let bits: number;
    switch (b.dtype) {
      case "f32":
        bits = f32ToBits(value);
        break;
      case "f16":
        bits = f16FromF32(value);
        break;
      case "bf16":
        bits = bf16FromF32(value);
        break;
      case "i32":
        bits = (value | 0) >>> 0;
        break;
      case "u32":
        bits = value >>> 0;
        break;
    }
    this.run(fillLaunch(b, dst.off, n, bits));
  }

  copy(src: View, dst: View, n: number): void {
    if (anySegmented(src, dst)) return forElementBlocks(this.host, "copy", n, [{ view: src, io: "in", arg: "src" }, { view: dst, io: "out", arg: "dst" }], [], (_s, c, [a, b]) => this.copy(a!, b!, c));
    const s = this.v(src, n, "copy", "src");
    const d = this.v(dst, n, "copy", "dst");
    if (s.dtype !== d.dtype) throw new Error(`webgpu copy: src is ${s.dtype} but dst is ${d.dtype} (use cast)`);
    if (n === 0) return;
    const eb = DTYPE_BYTES[s.dtype];
    if (s !== d && (src.off * eb) % 4 === 0 && (dst.off * eb) % 4 === 0 && (n * eb) % 4 === 0) {
      this.batcher.copy(s.gpu!, src.off * eb, d.gpu!, dst.off * eb, n * eb);
      return;
    }
    this.run(copyCastLaunch(s, src.off, d, dst.off, n));
  }

  cast(src: View, dst: View, n: number): void {
    if (anySegmented(src, dst)) return forElementBlocks(this.host, "cast", n, [{ view: src, io: "in", arg: "src", dtypes: FLOATS }, { view: dst, io: "out", arg: "dst", dtypes: FLOATS }], [], (_s, c, [a, b]) => this.cast(a!, b!, c));
    const s = this.v(src, n, "cast", "src", FLOATS);
    const d = this.v(dst, n, "cast", "dst", FLOATS);
    if (n === 0) return;
    if (s.dtype === d.dtype) return this.copy(src, dst, n);
    this.run(copyCastLaunch(s, src.off, d, dst.off, n));
  }

  randomFill(dst: View, n: number, spec: RandomFillSpec): void {
    checkRandomFillSpec(spec, n, "webgpu randomFill");
    // a view across segments: one fill per segment piece, each at its own stream position
    if (anySegmented(dst)) return forElementBlocks(this.host, "randomFill", n, [{ view: dst, io: "out", arg: "dst", dtypes: FLOATS }], [], (s, c, [d]) => this.randomFill(d!, c, { ...spec, start: spec.start + s }));
    const b = this.v(dst, n, "randomFill", "dst", FLOATS);
    if (n > 0) this.run(randomFillLaunch(b, dst.off, n, spec));
  }

  // ---- elementwise ---------------------------------------------------------------------------

  unary(op: UnaryOp, x: View, y: View, n: number): void {
    if (anySegmented(x, y)) return forElementBlocks(this.host, `unary ${op}`, n, [{ view: x, io: "in", arg: "x", dtypes: F32 }, { view: y, io: "out", arg: "y", dtypes: F32 }], [], (_s, c, [xs, ys]) => this.unary(op, xs!, ys!, c));
    const xb = this.v(x, n, `unary ${op}`, "x", F32);
    const yb = this.v(y, n, `unary ${op}`, "y", F32);
    if (n > 0) this.run(unaryLaunch(op, xb, x.off, yb, y.off, n));
  }

  unaryBackward(op: UnaryOp, x: View, dy: View, dx: View, n: number): void {
    if (anySegmented(x, dy, dx)) return forElementBlocks(this.host, `unaryBackward ${op}`, n, [{ view: x, io: "in", arg: "x", dtypes: F32 }, { view: dy, io: "in", arg: "dy", dtypes: F32 }, { view: dx, io: "out", arg: "dx", dtypes: F32 }], [], (_s, c, [xs, dys, dxs]) => this.unaryBackward(op, xs!, dys!, dxs!, c));
    const xb = this.v(x, n, `unaryBackward ${op}`, "x", F32);
    const dyb = this.v(dy, n, `unaryBackward ${op}`, "dy", F32);
    const dxb = this.v(dx, n, `unaryBackward ${op}`, "dx", F32);
    if (n > 0) this.run(unaryBackwardLaunch(op, xb, x.off, dyb, dy.off, dxb, dx.off, n));
  }

  siluMul(gate: View, up: View, out: View, n: number): void {
    if (anySegmented(gate, up, out)) return forElementBlocks(this.host, "siluMul", n, [{ view: gate, io: "in", arg: "gate", dtypes: F32 }, { view: up, io: "in", arg: "up", dtypes: F32 }, { view: out, io: "out", arg: "out", dtypes: F32 }], [], (_s, c, [g, u, o]) => this.siluMul(g!, u!, o!, c));
    const gb = this.v(gate, n, "siluMul", "gate", F32);
    const ub = this.v(up, n, "siluMul", "up", F32);
    const ob = this.v(out, n, "siluMul", "out", F32);
    if (n > 0) this.run(siluMulLaunch(gb, gate.off, ub, up.off, ob, out.off, n));
  }

  siluMulBackward(gate: View, up: View, dy: View, dGate: View, dUp: View, n: number): void {
    if (anySegmented(gate, up, dy, dGate, dUp)) return forElementBlocks(this.host, "siluMulBackward", n, [{ view: gate, io: "in", arg: "gate", dtypes: F32 }, { view: up, io: "in", arg: "up", dtypes: F32 }, { view: dy, io: "in", arg: "dy", dtypes: F32 }, { view: dGate, io: "out", arg: "dGate", dtypes: F32 }, { view: dUp, io: "out", arg: "dUp", dtypes: F32 }], [], (_s, c, [g, u, d, dg, du]) => this.siluMulBackward(g!, u!, d!, dg!, du!, c));
    const gb = this.v(gate, n, "siluMulBackward", "gate", F32);
    const ub = this.v(up, n, "siluMulBackward", "up", F32);
    const db = this.v(dy, n, "siluMulBackward", "dy", F32);
    const dgb = this.v(dGate, n, "siluMulBackward", "dGate", F32);
    const dub = this.v(dUp, n, "siluMulBackward", "dUp", F32);
    if (n > 0) this.run(siluMulBackwardLaunch(gb, gate.off, ub, up.off, db, dy.off, dgb, dGate.off, dub, dUp.off, n));
  }

  affine(x: View, y: View, n: number, alpha: number, beta: number): void {
    if (anySegmented(x, y)) return forElementBlocks(this.host, "affine", n, [{ view: x, io: "in", arg: "x", dtypes: F32 }, { view: y, io: "out", arg: "y", dtypes: F32 }], [], (_s, c, [xs, ys]) => this.affine(xs!, ys!, c, alpha, beta));
    const xb = this.v(x, n, "affine", "x", F32);
    const yb = this.v(y, n, "affine", "y", F32);
    if (n > 0) this.run(affineLaunch(xb, x.off, yb, y.off, n, alpha, beta));
  }

  binary(op: BinaryOp, a: View, aShape: readonly number[], b: View, bShape: readonly number[], out: View): void {
    if (anySegmented(a, b, out)) return this.binarySegmented(op, a, aShape, b, bShape, out);
    const plan = planBroadcast(aShape, bShape);
    const na = aShape.reduce((p, d) => p * d, 1);
    const nb = bShape.reduce((p, d) => p * d, 1);
    const ab = this.v(a, na, `binary ${op}`, "a", F32);
    const bb = this.v(b, nb, `binary ${op}`, "b", F32);
    const ob = this.v(out, plan.total, `binary ${op}`, "out", F32);
    this.run(binaryLaunch(op, ab, a.off, aShape, bb, b.off, bShape, ob, out.off));
  }

  axpy(alpha: number, x: View, y: View, n: number): void {
    if (anySegmented(x, y)) return forElementBlocks(this.host, "axpy", n, [{ view: x, io: "in", arg: "x", dtypes: F32 }, { view: y, io: "inout", arg: "y", dtypes: F32 }], [], (_s, c, [xs, ys]) => this.axpy(alpha, xs!, ys!, c));
    const xb = this.v(x, n, "axpy", "x", F32);
    const yb = this.v(y, n, "axpy", "y", F32);
    if (n > 0) this.run(axpyLaunch(alpha, xb, x.off, yb, y.off, n));
  }

  // ---- reductions ----------------------------------------------------------------------------

  reduce(op: ReduceOp, x: View, out: View, outer: number, n: number, inner: number): void {
    if (anySegmented(x, out)) {
      if (!["sum", "mean", "max", "sumsq"].includes(op)) throw new Error(`webgpu reduce: unknown op "${op}"`);
      const args: RowArg[] = [
        { view: x, perRow: n * inner, io: "in", arg: "x", dtypes: F32 },
        { view: out, perRow: inner, io: "out", arg: "out", dtypes: F32 },
      ];
      return forRowBlocks(this.host, `reduce ${op}`, outer, args, [], (_r, c, [xs, os]) => this.reduce(op, xs!, os!, c, n, inner), (r) => this.reduceSlice(op, { buf: x.buf, off: x.off + r * n * inner }, { buf: out.buf, off: out.off + r * inner }, n, inner));
    }
    if (!["sum", "mean", "max", "sumsq"].includes(op)) throw new Error(`webgpu reduce: unknown op "${op}"`);
    const xb = this.v(x, outer * n * inner, `reduce ${op}`, "x", F32);
    const ob = this.v(out, outer * inner, `reduce ${op}`, "out", F32);
    const need = reduceScratch(outer, n, inner);
    const scratch = need > 0 ? this.scratchBuf("reduce_partials", "f32", need) : null;
    this.runAll(reduceLaunches(op, xb, x.off, ob, out.off, outer, n, inner, scratch));
  }

  // ---- rows ----------------------------------------------------------------------------------

  softmax(x: View, y: View, rows: number, cols: number, log: boolean): void {
    if (anySegmented(x, y)) return forRowBlocks(this.host, "softmax", rows, [{ view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 }, { view: y, perRow: cols, io: "out", arg: "y", dtypes: F32 }], [], (_r, c, [xs, ys]) => this.softmax(xs!, ys!, c, cols, log));
    const xb = this.v(x, rows * cols, "softmax", "x", F32);
    const yb = this.v(y, rows * cols, "softmax", "y", F32);
    if (rows * cols > 0) this.run(softmaxLaunch(xb, x.off, yb, y.off, rows, cols, log));
  }

  softmaxBackward(y: View, dy: View, dx: View, rows: number, cols: number, log: boolean): void {
    if (anySegmented(y, dy, dx)) return forRowBlocks(this.host, "softmaxBackward", rows, [{ view: y, perRow: cols, io: "in", arg: "y", dtypes: F32 }, { view: dy, perRow: cols, io: "in", arg: "dy", dtypes: F32 }, { view: dx, perRow: cols, io: "out", arg: "dx", dtypes: F32 }], [], (_r, c, [ys, dys, dxs]) => this.softmaxBackward(ys!, dys!, dxs!, c, cols, log));
    const n = rows * cols;
    const yb = this.v(y, n, "softmaxBackward", "y", F32);
    const dyb = this.v(dy, n, "softmaxBackward", "dy", F32);
    const dxb = this.v(dx, n, "softmaxBackward", "dx", F32);
    if (n > 0) this.run(softmaxBackwardLaunch(yb, y.off, dyb, dy.off, dxb, dx.off, rows, cols, log));
  }

  rmsnorm(x: View, w: View, y: View, rstd: View, rows: number, cols: number, eps: number): void {
    if (anySegmented(x, w, y, rstd)) return forRowBlocks(this.host, "rmsnorm", rows, [{ view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 }, { view: y, perRow: cols, io: "out", arg: "y", dtypes: F32 }, { view: rstd, perRow: 1, io: "out", arg: "rstd", dtypes: F32 }], [{ view: w, n: cols, arg: "w", dtypes: F32 }], (_r, c, [xs, ys, rs], [ws]) => this.rmsnorm(xs!, ws!, ys!, rs!, c, cols, eps));
    const n = rows * cols;
    const xb = this.v(x, n, "rmsnorm", "x", F32);
    const wb = this.v(w, cols, "rmsnorm", "w", F32);
    const yb = this.v(y, n, "rmsnorm", "y", F32);
    const rb = this.v(rstd, rows, "rmsnorm", "rstd", F32);
    if (rows > 0) this.run(rmsnormLaunch(xb, x.off, wb, w.off, yb, y.off, rb, rstd.off, rows, cols, eps));
  }

  rmsnormBackward(x: View, w: View, rstd: View, dy: View, dx: View, dw: View, rows: number, cols: number): void {
    if (anySegmented(x, w, rstd, dy, dx, dw)) return forRowBlocks(this.host, "rmsnormBackward", rows, [{ view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 }, { view: rstd, perRow: 1, io: "in", arg: "rstd", dtypes: F32 }, { view: dy, perRow: cols, io: "in", arg: "dy", dtypes: F32 }, { view: dx, perRow: cols, io: "out", arg: "dx", dtypes: F32 }], [{ view: w, n: cols, arg: "w", dtypes: F32 }, { view: dw, n: cols, arg: "dw", dtypes: F32 }], (_r, c, [xs, rs, dys, dxs], [ws, dws]) => this.rmsnormBackward(xs!, ws!, rs!, dys!, dxs!, dws!, c, cols));
    const n = rows * cols;
    const op = "rmsnormBackward";
    const xb = this.v(x, n, op, "x", F32);
    const wb = this.v(w, cols, op, "w", F32);
    const rb = this.v(rstd, rows, op, "rstd", F32);
    const dyb = this.v(dy, n, op, "dy", F32);
    const dxb = this.v(dx, n, op, "dx", F32);
    const dwb = this.v(dw, cols, op, "dw", F32);
    if (n === 0) return;
    const scratch = this.scratchBuf("norm_partials", "f32", normChunks(rows) * cols);
    this.runAll(rmsnormBackwardLaunches(xb, x.off, wb, w.off, rb, rstd.off, dyb, dy.off, dxb, dx.off, dwb, dw.off, rows, cols, scratch));
  }

  addRmsnorm(x: View, r: View, w: View, sum: View, y: View, rstd: View, rows: number, cols: number, eps: number): void {
    if (anySegmented(x, r, w, sum, y, rstd)) return forRowBlocks(this.host, "addRmsnorm", rows, [{ view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 }, { view: r, perRow: cols, io: "in", arg: "r", dtypes: F32 }, { view: sum, perRow: cols, io: "out", arg: "sum", dtypes: F32 }, { view: y, perRow: cols, io: "out", arg: "y", dtypes: F32 }, { view: rstd, perRow: 1, io: "out", arg: "rstd", dtypes: F32 }], [{ view: w, n: cols, arg: "w", dtypes: F32 }], (_r, c, [xs, rs, ss, ys, ts], [ws]) => this.addRmsnorm(xs!, rs!, ws!, ss!, ys!, ts!, c, cols, eps));
    const n = rows * cols;
    const op = "addRmsnorm";
    const xb = this.v(x, n, op, "x", F32);
    const rb = this.v(r, n, op, "r", F32);
    const wb = this.v(w, cols, op, "w", F32);
    const sb = this.v(sum, n, op, "sum", F32);
    const yb = this.v(y, n, op, "y", F32);
    const tb = this.v(rstd, rows, op, "rstd", F32);
    if (rows > 0) this.run(addRmsnormLaunch(xb, x.off, rb, r.off, wb, w.off, sb, sum.off, yb, y.off, tb, rstd.off, rows, cols, eps));
  }

  addRmsnormBackward(sum: View, w: View, rstd: View, dy: View, dSum: View | null, dx: View, dw: View, rows: number, cols: number): void {
    if (anySegmented(sum, w, rstd, dy, dSum, dx, dw)) {
      const args: RowArg[] = [
        { view: sum, perRow: cols, io: "in", arg: "sum", dtypes: F32 },
        { view: rstd, perRow: 1, io: "in", arg: "rstd", dtypes: F32 },
        { view: dy, perRow: cols, io: "in", arg: "dy", dtypes: F32 },
        { view: dx, perRow: cols, io: "out", arg: "dx", dtypes: F32 },
      ];
      if (dSum) args.push({ view: dSum, perRow: cols, io: "in", arg: "dSum", dtypes: F32 });
      return forRowBlocks(this.host, "addRmsnormBackward", rows, args, [{ view: w, n: cols, arg: "w", dtypes: F32 }, { view: dw, n: cols, arg: "dw", dtypes: F32 }], (_r, c, [ss, ts, dys, dxs, dss], [ws, dws]) => this.addRmsnormBackward(ss!, ws!, ts!, dys!, dss ?? null, dxs!, dws!, c, cols));
    }
    const n = rows * cols;
    const op = "addRmsnormBackward";
    const sb = this.v(sum, n, op, "sum", F32);
    const wb = this.v(w, cols, op, "w", F32);
    const tb = this.v(rstd, rows, op, "rstd", F32);
    const dyb = this.v(dy, n, op, "dy", F32);
    const dsb = dSum ? this.v(dSum, n, op, "dSum", F32) : null;
    const dxb = this.v(dx, n, op, "dx", F32);
    const dwb = this.v(dw, cols, op, "dw", F32);
    if (n === 0) return;
    const scratch = this.scratchBuf("norm_partials", "f32", normChunks(rows) * cols);
    this.runAll(addRmsnormBackwardLaunches(sb, sum.off, wb, w.off, tb, rstd.off, dyb, dy.off, dsb, dSum?.off ?? 0, dxb, dx.off, dwb, dw.off, rows, cols, scratch));
  }

  layernorm(x: View, w: View, b: View, y: View, mean: View, rstd: View, rows: number, cols: number, eps: number): void {
    if (anySegmented(x, w, b, y, mean, rstd)) return forRowBlocks(this.host, "layernorm", rows, [{ view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 }, { view: y, perRow: cols, io: "out", arg: "y", dtypes: F32 }, { view: mean, perRow: 1, io: "out", arg: "mean", dtypes: F32 }, { view: rstd, perRow: 1, io: "out", arg: "rstd", dtypes: F32 }], [{ view: w, n: cols, arg: "w", dtypes: F32 }, { view: b, n: cols, arg: "b", dtypes: F32 }], (_r, c, [xs, ys, ms, rs], [ws, bs]) => this.layernorm(xs!, ws!, bs!, ys!, ms!, rs!, c, cols, eps));
    const n = rows * cols;
    const op = "layernorm";
    const xb = this.v(x, n, op, "x", F32);
    const wb = this.v(w, cols, op, "w", F32);
    const bb = this.v(b, cols, op, "b", F32);
    const yb = this.v(y, n, op, "y", F32);
    const mb = this.v(mean, rows, op, "mean", F32);
    const rb = this.v(rstd, rows, op, "rstd", F32);
    if (rows > 0) this.run(layernormLaunch(xb, x.off, wb, w.off, bb, b.off, yb, y.off, mb, mean.off, rb, rstd.off, rows, cols, eps));
  }

  layernormBackward(x: View, w: View, mean: View, rstd: View, dy: View, dx: View, dw: View, db: View, rows: number, cols: number): void {
    if (anySegmented(x, w, mean, rstd, dy, dx, dw, db)) return forRowBlocks(this.host, "layernormBackward", rows, [{ view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 }, { view: mean, perRow: 1, io: "in", arg: "mean", dtypes: F32 }, { view: rstd, perRow: 1, io: "in", arg: "rstd", dtypes: F32 }, { view: dy, perRow: cols, io: "in", arg: "dy", dtypes: F32 }, { view: dx, perRow: cols, io: "out", arg: "dx", dtypes: F32 }], [{ view: w, n: cols, arg: "w", dtypes: F32 }, { view: dw, n: cols, arg: "dw", dtypes: F32 }, { view: db, n: cols, arg: "db", dtypes: F32 }], (_r, c, [xs, ms, rs, dys, dxs], [ws, dws, dbs]) => this.layernormBackward(xs!, ws!, ms!, rs!, dys!, dxs!, dws!, dbs!, c, cols));
    const n = rows * cols;
    const op = "layernormBackward";
    const xb = this.v(x, n, op, "x", F32);
    const wb = this.v(w, cols, op, "w", F32);
    const mb = this.v(mean, rows, op, "mean", F32);
    const rb = this.v(rstd, rows, op, "rstd", F32);
    const dyb = this.v(dy, n, op, "dy", F32);
    const dxb = this.v(dx, n, op, "dx", F32);
    const dwb = this.v(dw, cols, op, "dw", F32);
    const dbb = this.v(db, cols, op, "db", F32);
    if (n === 0) return;
    const scratch = this.scratchBuf("norm_partials", "f32", 2 * normChunks(rows) * cols);
    this.runAll(layernormBackwardLaunches(xb, x.off, wb, w.off, mb, mean.off, rb, rstd.off, dyb, dy.off, dxb, dx.off, dwb, dw.off, dbb, db.off, rows, cols, scratch));
  }

  // ---- matmul --------------------------------------------------------------------------------

  matmul(a: View, b: View, out: View, spec: MatmulSpec): void {
    if (anySegmented(a, b, out)) return matmulSegmented(this.host, a, b, out, spec);
    const ext = matmulExtents(spec);
    const ab = this.v(a, ext.a, "matmul", "a", F32);
    const bb = this.v(b, ext.b, "matmul", "b", F32);
    const ob = this.v(out, ext.out, "matmul", "out", F32);
    // The register-blocked kernel (kernels/src/wgsl/matmul_fast*.ts), tiles chosen per shape within
    // this device's workgroup limits (the baseline tiled kernel in wgsl/matmul.ts stays as reference).
    // Shapes with few output tiles and long K (weight gradients above all) split K over a scratch
    // (wgsl/matmul-split-k.ts).
    const { tile, splitK } = this.matmulTuning;
    const f32 = ab.dtype === "f32" && bb.dtype === "f32";
    const tc = this.coop;
    if (tc && f32 && coopWork(spec, tc.launch) >= tc.minBlocks) return this.runAll(coopMatmulLaunches(ab, a.off, bb, b.off, ob, out.off, spec, this.coopScratch, { ...tc.launch, maxScratchElems: this.ledger.segElems }));
    const sk = f32 && (this.splitK || splitK !== undefined) ? planSplitK(spec, this.matmulLimits, splitK) : null;
    if (sk) return this.runAll(splitKMatmulLaunches(ab, a.off, bb, b.off, ob, out.off, spec, sk, this.scratchBuf("matmul_split_k", "f32", sk.scratchElems), this.maxPerDim, this.matmulLimits, tile));
    this.runAll(planMatmulFastLaunches(ab, a.off, bb, b.off, ob, out.off, spec, this.maxPerDim, this.matmulLimits, tile));
  }

  /** All groups in one dispatch: the host offsets are uploaded (i32) and run by the device-offset
   * kernel of {@link groupedMatmulDev} (wgsl/grouped-matmul.ts). */
  groupedMatmul(x: View, w: View, out: View, spec: GroupedMatmulSpec): void {
    if (anySegmented(x, w, out)) return this.groupedMatmulSegmented(x, w, out, spec);
    const g = groupedMatmulGeometry(spec, "webgpu");
    const ext = groupedMatmulExtents(g);
    const xb = this.v(x, ext.x, "groupedMatmul", "x", F32);
    const wb = this.v(w, ext.w, "groupedMatmul", "w", F32);
    const ob = this.v(out, ext.out, "groupedMatmul", "out", F32);
    if (g.R === 0 || g.N === 0) return;
    const fb = this.scratchBuf("grouped_matmul_offsets", "i32", g.G + 1);
    this.write({ buf: fb, off: 0 }, Int32Array.from(g.offsets));
    this.groupedRows(xb, x.off, wb, w.off, fb, 0, ob, out.off, g);
  }

  /** All groups in one dispatch, offsets on the device (wgsl/grouped-matmul.ts). */
  groupedMatmulDev(x: View, w: View, out: View, offsets: View, spec: GroupedMatmulDevSpec): void {
    if (anySegmented(x, w, out, offsets)) {
      const g = groupedDevGeometry(spec, "webgpu");
      const ext = groupedDevExtents(g);
      const op = "groupedMatmulDev";
      this.ledger.check(w, ext.w, op, "w", F32);
      [offsets] = this.one(op, [offsets, ext.offsets, "offsets", I32]) as [View];
      if (crosses(x, ext.x) || crosses(out, ext.out)) {
        // blocks of rows (x, out) with the offsets shifted to each block: the kernel clamps them to
        // its rows, so every group computes exactly its rows inside the block
        const args: RowArg[] = [
          { view: x, perRow: g.K, io: "in", arg: "x", dtypes: F32 },
          { view: out, perRow: g.N, io: "inout", arg: "out", dtypes: F32 },
        ];
        return forRowBlocks(this.host, op, g.R, args, [], (r0, c, [xs, os]) => this.withShiftedOffsets(offsets, g.G + 1, r0, (fv) => this.groupedMatmulDev(xs!, w, os!, fv, { ...spec, R: c })));
      }
      [x, out] = this.one(op, [x, ext.x, "x", F32], [out, ext.out, "out", F32]) as [View, View];
      // groups in runs whose weights lie in one segment: rows of the other groups are untouched
      return this.groupRuns(op, w, g.G, g.N * g.K, g.strideW, "in", (g0, cnt, wv) => this.groupedMatmulDev(x, wv, out, { buf: offsets.buf, off: offsets.off + g0 }, { ...spec, G: cnt, strideW: g.strideW }));
    }
    const g = groupedDevGeometry(spec, "webgpu");
    const ext = groupedDevExtents(g);
    const op = "groupedMatmulDev";
    const xb = this.v(x, ext.x, op, "x", F32);
    const wb = this.v(w, ext.w, op, "w", F32);
    const ob = this.v(out, ext.out, op, "out", F32);
    const fb = this.v(offsets, ext.offsets, op, "offsets", I32);
    // K = 0: the kernel's K loop is empty and the covered rows become zeros, as with matmul
    this.groupedRows(xb, x.off, wb, w.off, fb, offsets.off, ob, out.off, g);
  }

  /** A grouped forward / dX on the tensor cores where on and large enough, else the FMA kernel. */
  private groupedRows(xb: GpuBuf, xoff: number, wb: GpuBuf, woff: number, fb: GpuBuf, foff: number, ob: GpuBuf, ooff: number, g: GroupedDevGeometry): void {
    const tc = this.coop;
    if (tc && groupedCoopDevBlocks(g) >= tc.minBlocks) return this.runAll(groupedCoopDevLaunches(xb, xoff, wb, woff, fb, foff, ob, ooff, g, this.coopScratch, tc.launch));
    this.run(groupedMatmulDevLaunch(xb, xoff, wb, woff, fb, foff, ob, ooff, g, this.matmulLimits, this.maxPerDim, this.matmulTuning.tile));
  }

  /** The tensor-core launches' scratches (operand maxima, packed operands, split-K partials;
   * wgsl/matmul-coop-launch.ts COOP_SCRATCH), reused across products and grown on demand. */
  private readonly coopScratch: CoopScratch = (name, dtype, length) => {
    // never grown past one binding (a scratch of several segments cannot be bound whole)
    const cur = this.scratch.get(name);
    if (cur && cur.length < length && 2 * cur.length > this.ledger.segElems) {
      this.free(cur);
      this.scratch.delete(name);
    }
    return this.scratchBuf(name, dtype, length);
  };

  /** Every group's dW in one dispatch, offsets on the device (wgsl/grouped-matmul.ts). */
  groupedWeightGrad(dy: View, x: View, dw: View, offsets: View, spec: GroupedWeightGradSpec): void {
    if (anySegmented(dy, x, dw, offsets)) {
      const g = groupedWGradGeometry(spec, "webgpu");
      const ext = groupedWGradExtents(g);
      const op = "groupedWeightGrad";
      this.ledger.check(dw, ext.dw, op, "dw", F32);
      [offsets] = this.one(op, [offsets, ext.offsets, "offsets", I32]) as [View];
      if (crosses(dy, ext.dy) || crosses(x, ext.x)) {
        // blocks of rows (dy, x) with shifted offsets, each adding its rows' products: the first
        // block as asked, the others accumulating (dW_g sums its rows block by block: f32 rounding)
        const args: RowArg[] = [
          { view: dy, perRow: g.M, io: "in", arg: "dy", dtypes: F32 },
          { view: x, perRow: g.N, io: "in", arg: "x", dtypes: F32 },
        ];
        let first = true;
        return forRowBlocks(this.host, op, g.R, args, [], (r0, c, [ds, xs]) => {
          const acc = first ? (spec.accumulate ?? false) : true;
          first = false;
          this.withShiftedOffsets(offsets, g.G + 1, r0, (fv) => this.groupedWeightGrad(ds!, xs!, dw, fv, { ...spec, R: c, accumulate: acc }));
        });
      }
      [dy, x] = this.one(op, [dy, ext.dy, "dy", F32], [x, ext.x, "x", F32]) as [View, View];
      return this.groupRuns(op, dw, g.G, g.M * g.N, g.strideW, spec.accumulate ? "inout" : "out", (g0, cnt, dv) => this.groupedWeightGrad(dy, x, dv, { buf: offsets.buf, off: offsets.off + g0 }, { ...spec, G: cnt, strideW: g.strideW }));
    }
    const g = groupedWGradGeometry(spec, "webgpu");
    const ext = groupedWGradExtents(g);
    const op = "groupedWeightGrad";
    const db = this.v(dy, ext.dy, op, "dy", F32);
    const xb = this.v(x, ext.x, op, "x", F32);
    const wb = this.v(dw, ext.dw, op, "dw", F32);
    const fb = this.v(offsets, ext.offsets, op, "offsets", I32);
    const tc = this.coop;
    if (tc && groupedCoopWGradBlocks(g) >= tc.minBlocks) return this.runAll(groupedCoopWGradLaunches(db, dy.off, xb, x.off, fb, offsets.off, wb, dw.off, g, this.coopScratch, tc.launch));
    this.run(groupedWeightGradLaunch(db, dy.off, xb, x.off, fb, offsets.off, wb, dw.off, g, this.matmulLimits, this.maxPerDim, this.matmulTuning.tile));
  }

  // ---- embeddings, losses --------------------------------------------------------------------

  embedding(table: View, ids: View, out: View, n: number, dim: number): void {
    if (anySegmented(table, ids, out)) return this.gatherSegmented("embedding", table, ids, out, n, dim);
    const tb = this.v(table, 0, "embedding", "table", F32);
    const ib = this.v(ids, n, "embedding", "ids", I32);
    const ob = this.v(out, n * dim, "embedding", "out", F32);
    const rows = dim > 0 ? Math.floor((tb.length - table.off) / dim) : 0;
    this.run(gatherRowsLaunch(tb, table.off, rows, ib, ids.off, ob, out.off, n, dim));
  }

  embeddingBackward(dout: View, ids: View, dtable: View, n: number, dim: number): void {
    this.scatterRows("embeddingBackward", dout, ids, null, dtable, n, dim);
  }

  crossEntropy(logits: View, targets: View, losses: View, dlogits: View, rows: number, vocab: number, ignoreIndex: number, gradScale: number): void {
    if (anySegmented(logits, targets, losses, dlogits)) {
      const args: RowArg[] = [
        { view: logits, perRow: vocab, io: "in", arg: "logits", dtypes: F32 },
        { view: targets, perRow: 1, io: "in", arg: "targets", dtypes: I32 },
        { view: losses, perRow: 1, io: "out", arg: "losses", dtypes: F32 },
        { view: dlogits, perRow: vocab, io: "out", arg: "dlogits", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "crossEntropy", rows, args, [], (_r, c, [ls, ts, lss, ds]) => this.crossEntropy(ls!, ts!, lss!, ds!, c, vocab, ignoreIndex, gradScale));
    }
    const op = "crossEntropy";
    const lb = this.v(logits, rows * vocab, op, "logits", F32);
    const tb = this.v(targets, rows, op, "targets", I32);
    const lsb = this.v(losses, rows, op, "losses", F32);
    const db = this.v(dlogits, rows * vocab, op, "dlogits", F32);
    if (rows > 0) this.run(crossEntropyLaunch(lb, logits.off, tb, targets.off, lsb, losses.off, db, dlogits.off, rows, vocab, ignoreIndex, gradScale));
  }

  crossEntropyTileStats(logits: View, targets: View, stats: View, rows: number, cols: number, col0: number, ignoreIndex: number, first: boolean): void {
    if (anySegmented(logits, targets, stats)) {
      const args: RowArg[] = [
        { view: logits, perRow: cols, io: "in", arg: "logits", dtypes: F32 },
        { view: targets, perRow: 1, io: "in", arg: "targets", dtypes: I32 },
        { view: stats, perRow: 3, io: "inout", arg: "stats", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "crossEntropyTileStats", rows, args, [], (_r, c, [ls, ts, ss]) => this.crossEntropyTileStats(ls!, ts!, ss!, c, cols, col0, ignoreIndex, first));
    }
    const op = "crossEntropyTileStats";
    const lb = this.v(logits, rows * cols, op, "logits", F32);
    const tb = this.v(targets, rows, op, "targets", I32);
    const sb = this.v(stats, 3 * rows, op, "stats", F32);
    if (rows > 0) this.run(ceTileStatsLaunch(lb, logits.off, tb, targets.off, sb, stats.off, rows, cols, col0, ignoreIndex, first));
  }

  crossEntropyTileFinish(stats: View, targets: View, lse: View, losses: View, rows: number, vocab: number, ignoreIndex: number, zLoss: number): void {
    if (anySegmented(stats, targets, lse, losses)) {
      const args: RowArg[] = [
        { view: stats, perRow: 3, io: "in", arg: "stats", dtypes: F32 },
        { view: targets, perRow: 1, io: "in", arg: "targets", dtypes: I32 },
        { view: lse, perRow: 1, io: "out", arg: "lse", dtypes: F32 },
        { view: losses, perRow: 1, io: "out", arg: "losses", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "crossEntropyTileFinish", rows, args, [], (_r, c, [ss, ts, es, ls]) => this.crossEntropyTileFinish(ss!, ts!, es!, ls!, c, vocab, ignoreIndex, zLoss));
    }
    const op = "crossEntropyTileFinish";
    const sb = this.v(stats, 3 * rows, op, "stats", F32);
    const tb = this.v(targets, rows, op, "targets", I32);
    const eb = this.v(lse, rows, op, "lse", F32);
    const lsb = this.v(losses, rows, op, "losses", F32);
    if (rows > 0) this.run(ceTileFinishLaunch(sb, stats.off, tb, targets.off, eb, lse.off, lsb, losses.off, rows, vocab, ignoreIndex, zLoss));
  }

  crossEntropyTileBackward(logits: View, targets: View, lse: View, gradOut: View, rows: number, cols: number, col0: number, ignoreIndex: number, gradScale: number, zLoss: number): void {
    if (anySegmented(logits, targets, lse, gradOut)) {
      const args: RowArg[] = [
        { view: logits, perRow: cols, io: "inout", arg: "logits", dtypes: F32 },
        { view: targets, perRow: 1, io: "in", arg: "targets", dtypes: I32 },
        { view: lse, perRow: 1, io: "in", arg: "lse", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "crossEntropyTileBackward", rows, args, [{ view: gradOut, n: 1, arg: "gradOut", dtypes: F32 }], (_r, c, [ls, ts, es], [gs]) => this.crossEntropyTileBackward(ls!, ts!, es!, gs!, c, cols, col0, ignoreIndex, gradScale, zLoss));
    }
    const op = "crossEntropyTileBackward";
    const lb = this.v(logits, rows * cols, op, "logits", F32);
    const tb = this.v(targets, rows, op, "targets", I32);
    const eb = this.v(lse, rows, op, "lse", F32);
    const gb = this.v(gradOut, 1, op, "gradOut", F32);
    if (rows > 0) this.run(ceTileBackwardLaunch(lb, logits.off, tb, targets.off, eb, lse.off, gb, gradOut.off, rows, cols, col0, ignoreIndex, gradScale, zLoss));
  }

  // ---- transformer pieces --------------------------------------------------------------------

  rope(x: View, y: View, batch: number, seq: number, heads: number, headDim: number, theta: number | Float64Array, inverse: boolean): void {
    if (anySegmented(x, y)) {
      const args: RowArg[] = [
        { view: x, perRow: heads * headDim, io: "in", arg: "x", dtypes: F32 },
        { view: y, perRow: heads * headDim, io: "out", arg: "y", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "rope", batch * seq, args, [], (r0, c, [xs, ys]) => this.ropeBlock(xs!, ys!, batch, seq, heads, headDim, theta, inverse, r0, c));
    }
    this.ropeBlock(x, y, batch, seq, heads, headDim, theta, inverse, 0, batch * seq);
  }

  /** rope over `positions` flattened (batch, seq) positions from `pos0` (x, y at those rows). */
  private ropeBlock(x: View, y: View, batch: number, seq: number, heads: number, headDim: number, theta: number | Float64Array, inverse: boolean, pos0: number, positions: number): void {
    const n = positions * heads * headDim;
    const xb = this.v(x, n, "rope", "x", F32);
    const yb = this.v(y, n, "rope", "y", F32);
    if (n === 0) return;
    // a table of inverse frequencies (scaled RoPE) is keyed by its values
    const key = typeof theta === "number" ? `${headDim}:${theta}` : `${headDim}:table:${Array.from(theta).join(",")}`;
    let table = this.ropeTables.get(key);
    if (!table) {
      if (typeof theta !== "number" && theta.length !== headDim / 2) throw new Error(`webgpu rope: ${theta.length} inverse frequencies for head dim ${headDim} (expected ${headDim / 2})`);
      const t = typeof theta === "number" ? ropeInvFreq(headDim, theta) : Float32Array.from(theta);
      table = this.ledger.alloc("f32", t.length, "other");
      this.batcher.beforeWrite(table.gpu!, 0, t.byteLength);
      this.device.queue.writeBuffer(table.gpu!, 0, t.buffer, 0, t.byteLength);
      this.ropeTables.set(key, table);
    }
    this.run(ropeLaunch(table, xb, x.off, yb, y.off, batch, seq, heads, headDim, inverse, pos0, positions));
  }

  /** {@link Backend.attention}; `causal` false (attention over every key) is this backend's
   * extension, available where the tensor-core kernels run ({@link attentionKernels}) and refused
   * otherwise. */
  attention(q: View, k: View, v: View, out: View, lse: View, B: number, S: number, H: number, Hkv: number, D: number, scale: number, causal = true): void {
    if (anySegmented(q, k, v, out, lse)) {
      // batch items are independent: blocks of whole batch items
      const args: RowArg[] = [
        { view: q, perRow: S * H * D, io: "in", arg: "q", dtypes: F32 },
        { view: k, perRow: S * Hkv * D, io: "in", arg: "k", dtypes: F32 },
        { view: v, perRow: S * Hkv * D, io: "in", arg: "v", dtypes: F32 },
        { view: out, perRow: S * H * D, io: "out", arg: "out", dtypes: F32 },
        { view: lse, perRow: H * S, io: "out", arg: "lse", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "attention", B, args, [], (_b, c, [qs, ks, vs, os, ls]) => this.attention(qs!, ks!, vs!, os!, ls!, c, S, H, Hkv, D, scale, causal));
    }
    const op = "attention";
    this.checkHeads(op, H, Hkv);
    const qb = this.v(q, B * S * H * D, op, "q", F32);
    const kb = this.v(k, B * S * Hkv * D, op, "k", F32);
    const vb = this.v(v, B * S * Hkv * D, op, "v", F32);
    const ob = this.v(out, B * S * H * D, op, "out", F32);
    const lb = this.v(lse, B * H * S, op, "lse", F32);
    const coop = this.coopAttention(op, B, S, H, Hkv, D, scale, causal);
    if (coop) return this.runAll(attentionCoopLaunches(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, coop, this.coopAttnScratch));
    const flash = this.flashBlocks(D);
    if (flash?.fwd) return this.run(attentionFlashLaunch(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, B, S, H, Hkv, D, scale, flash.fwd));
    const blk = this.attentionBlock(D).fwd;
    if (blk > 0) this.run(attentionTiledLaunch(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, B, S, H, Hkv, D, scale, blk));
    else this.run(attentionLaunch(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, B, S, H, Hkv, D, scale));
  }

  /** {@link Backend.attentionBackward}; `causal` as in {@link attention}. */
  attentionBackward(q: View, k: View, v: View, out: View, lse: View, dout: View, dq: View, dk: View, dv: View, B: number, S: number, H: number, Hkv: number, D: number, scale: number, causal = true): void {
    if (anySegmented(q, k, v, out, lse, dout, dq, dk, dv)) {
      const nq = B * S * H * D;
      const nk = B * S * Hkv * D;
      const per = (view: View, perRow: number, io: "in" | "out", arg: string): RowArg => ({ view, perRow, io, arg, dtypes: F32 });
      const q1 = S * H * D;
      const k1 = S * Hkv * D;
      const args = [per(q, q1, "in", "q"), per(k, k1, "in", "k"), per(v, k1, "in", "v"), per(out, q1, "in", "out"), per(lse, H * S, "in", "lse"), per(dout, q1, "in", "dout"), per(dq, q1, "out", "dq"), per(dk, k1, "out", "dk"), per(dv, k1, "out", "dv")];
      void nq;
      void nk;
      return forRowBlocks(this.host, "attentionBackward", B, args, [], (_b, c, [qs, ks, vs, os, ls, dos, dqs, dks, dvs]) => this.attentionBackward(qs!, ks!, vs!, os!, ls!, dos!, dqs!, dks!, dvs!, c, S, H, Hkv, D, scale, causal));
    }
    const op = "attentionBackward";
    this.checkHeads(op, H, Hkv);
    const nq = B * S * H * D;
    const nk = B * S * Hkv * D;
    const qb = this.v(q, nq, op, "q", F32);
    const kb = this.v(k, nk, op, "k", F32);
    const vb = this.v(v, nk, op, "v", F32);
    const ob = this.v(out, nq, op, "out", F32);
    const lb = this.v(lse, B * H * S, op, "lse", F32);
    const dob = this.v(dout, nq, op, "dout", F32);
    const dqb = this.v(dq, nq, op, "dq", F32);
    const dkb = this.v(dk, nk, op, "dk", F32);
    const dvb = this.v(dv, nk, op, "dv", F32);
    if (nq === 0) return;
    const delta = this.scratchBuf("attn_delta", "f32", B * H * S);
    const coop = this.coopAttention(op, B, S, H, Hkv, D, scale, causal);
    if (coop) return this.runAll(attentionCoopBackwardLaunches(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, dob, dout.off, dqb, dq.off, dkb, dk.off, dvb, dv.off, delta, coop, this.coopAttnScratch));
    const flash = this.flashBlocks(D);
    if (flash?.dq && flash.dkv) return this.runAll(attentionFlashBackwardLaunches(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, dob, dout.off, dqb, dq.off, dkb, dk.off, dvb, dv.off, delta, B, S, H, Hkv, D, scale, flash.dq, flash.dkv));
    const blk = this.attentionBlock(D).bwd;
    if (blk > 0) this.runAll(attentionTiledBackwardLaunches(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, dob, dout.off, dqb, dq.off, dkb, dk.off, dvb, dv.off, delta, B, S, H, Hkv, D, scale, blk));
    else this.runAll(attentionBackwardLaunches(qb, q.off, kb, k.off, vb, v.off, ob, out.off, lb, lse.off, dob, dout.off, dqb, dq.off, dkb, dk.off, dvb, dv.off, delta, B, S, H, Hkv, D, scale));
  }

  /** {@link WebGpuBackendOptions.matmulSplitK}. */
  private splitK = true;
  /** The tensor-core kernels' block, emulation and size threshold; null when they do not run
   * (creation options tensorCores, tensorCoreTile, tensorCoreMinBlocks: webgpu/tensor-cores.ts). */
  private coop: TensorCoreSetup["coop"] = null;
  /** Whether tensor-core matmuls are on, and why not ("off (not requested)" unless the creation
   * option tensorCores was given). */
  tensorCoresStatus = "off (not requested)";

  /** {@link WebGpuBackendOptions.matmulTuning}. */
  private matmulTuning: MatmulTuning = {};

  /** Forced fused-attention blocks ({@link WebGpuBackendOptions.attentionBlocks}). */
  private attentionBlocks: { fwd?: FlashBlock; dq?: FlashBlock; dkv?: FlashBlock } = {};

  /** Blocks of the tensor-core attention kernels (option attentionCoopBlocks), or null where
   * none fits the device. */
  private coopAttnBlocks: CoopAttnBlocks | null = null;

  /** Scratch buffers of the tensor-core attention (wgsl/attention-coop.ts COOP_ATTN_SCRATCH). */
  private readonly coopAttnScratch = (name: string, dtype: DType, length: number): GpuBuf => this.scratchBuf(name, dtype, length);

  /**
   * Which attention kernels run for head dim `D`: "coop" (wgsl/attention-coop.ts: tensor cores
   * on or emulated — option tensorCores —, attention mode "auto", D a multiple of 16 up to 128,
   * blocks that fit the device), else "flash" / "tiled" / "rows" (the FMA kernels, causal only).
   */
  attentionKernels(D: number): "coop" | "flash" | "tiled" | "rows" {
    if (this.attentionMode === "auto" && this.coop && this.coopAttnBlocks && coopAttnHeadDimOk(D)) return "coop";
    const flash = this.flashBlocks(D);
    if (flash?.fwd && flash.dq && flash.dkv) return "flash";
    return this.attentionBlock(D).fwd > 0 ? "tiled" : "rows";
  }

  /** The tensor-core attention problem of a call, or null when the FMA kernels run.
   * @throws Error naming the op when `causal` is false and the FMA kernels would run. */
  private coopAttention(op: string, B: number, S: number, H: number, Hkv: number, D: number, scale: number, causal: boolean): CoopAttnProblem | null {
    if (this.attentionKernels(D) === "coop") return { B, S, H, Hkv, D, scale, causal, blocks: this.coopAttnBlocks!, emulate: this.coop!.launch.emulate };
    if (!causal) throw new Error(`webgpu ${op}: non-causal attention needs the tensor-core attention kernels (option tensorCores on, attention "auto", head dim a multiple of 16 up to 128; here D = ${D}, ${this.tensorCoresStatus})`);
    return null;
  }

  /** Fused (flash) attention blocks for head dim D, or null in modes "tiled" and "rows". */
  private flashBlocks(D: number): ReturnType<typeof chooseFlashBlocks> | null {
    if (this.attentionMode !== "auto") return null;
    const lim = this.device.limits.maxComputeWorkgroupStorageSize;
    const c = chooseFlashBlocks(D, lim);
    const forced = (k: "fwd" | "dq" | "dkv"): FlashBlock | null => {
      const b = this.attentionBlocks[k];
      return b && flashTileBytes(D, b)[k] <= lim ? b : c[k];
    };
    return { fwd: forced("fwd"), dq: forced("dq"), dkv: forced("dkv") };
  }

  /** Tiled-attention block sizes for head dim D (0: use the per-row kernels). */
  private attentionBlock(D: number): { fwd: number; bwd: number } {
    if (this.attentionMode === "rows") return { fwd: 0, bwd: 0 };
    return chooseAttentionBlock(D, this.device.limits.maxComputeWorkgroupStorageSize);
  }

  private checkHeads(op: string, H: number, Hkv: number): void {
    if (!(Hkv >= 1 && H >= Hkv)) throw new Error(`webgpu ${op}: need 1 ≤ Hkv ≤ H, got H=${H}, Hkv=${Hkv}`);
  }

  // ---- MoE -----------------------------------------------------------------------------------

  topk(x: View, values: View, indices: View, rows: number, cols: number, k: number): void {
    if (anySegmented(x, values, indices)) {
      const args: RowArg[] = [
        { view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 },
        { view: values, perRow: k, io: "out", arg: "values", dtypes: F32 },
        { view: indices, perRow: k, io: "out", arg: "indices", dtypes: I32 },
      ];
      return forRowBlocks(this.host, "topk", rows, args, [], (_r, c, [xs, vs, is]) => this.topk(xs!, vs!, is!, c, cols, k));
    }
    const xb = this.v(x, rows * cols, "topk", "x", F32);
    const vb = this.v(values, rows * k, "topk", "values", F32);
    const ib = this.v(indices, rows * k, "topk", "indices", I32);
    this.run(topkLaunch(xb, x.off, vb, values.off, ib, indices.off, rows, cols, k));
  }

  gatherRows(x: View, idx: View, out: View, n: number, dim: number): void {
    if (anySegmented(x, idx, out)) return this.gatherSegmented("gatherRows", x, idx, out, n, dim);
    const xb = this.v(x, 0, "gatherRows", "x", F32);
    const ib = this.v(idx, n, "gatherRows", "idx", I32);
    const ob = this.v(out, n * dim, "gatherRows", "out", F32);
    const rows = dim > 0 ? Math.floor((xb.length - x.off) / dim) : 0;
    this.run(gatherRowsLaunch(xb, x.off, rows, ib, idx.off, ob, out.off, n, dim));
  }

  scatterAddRows(x: View, idx: View, weights: View | null, out: View, n: number, dim: number): void {
    this.scatterRows("scatterAddRows", x, idx, weights, out, n, dim);
  }

  private scatterRows(op: string, x: View, idx: View, weights: View | null, out: View, n: number, dim: number): void {
    if (anySegmented(x, idx, weights, out)) return this.scatterSegmented(op, x, idx, weights, out, n, dim);
    const xb = this.v(x, n * dim, op, "x", F32);
    const ib = this.v(idx, n, op, "idx", I32);
    const wb = weights ? this.v(weights, n, op, "weights", F32) : null;
    const ob = this.v(out, 0, op, "out", F32);
    const outRows = dim > 0 ? Math.floor((ob.length - out.off) / dim) : 0;
    if (n === 0 || dim === 0) return;
    const scratch = this.scratchBuf("scatter_order", "u32", scatterScratchWords(n));
    this.runAll(scatterAddRowsLaunches(xb, x.off, ib, idx.off, wb, weights?.off ?? 0, ob, out.off, outRows, n, dim, scratch));
  }

  histogram(idx: View, counts: View, n: number, bins: number): void {
    if (anySegmented(idx, counts)) {
      const [c] = this.one("histogram", [counts, bins, "counts", ["u32"]]);
      const cb = this.v(c!, bins, "histogram", "counts", ["u32"]);
      if (bins > 0) this.run(fillLaunch(cb, c!.off, bins, 0));
      return forElementBlocks(this.host, "histogram", n, [{ view: idx, io: "in", arg: "idx", dtypes: I32 }], [], (_s, m, [is]) => this.run(histogramLaunch(this.v(is!, m, "histogram", "idx", I32), is!.off, cb, c!.off, m, bins)));
    }
    const ib = this.v(idx, n, "histogram", "idx", I32);
    const cb = this.v(counts, bins, "histogram", "counts", ["u32"]);
    if (bins > 0) this.run(fillLaunch(cb, counts.off, bins, 0));
    this.run(histogramLaunch(ib, idx.off, cb, counts.off, n, bins));
  }

  /** The stable counting sort of pairs by expert in three dispatches (wgsl/moe-permute.ts). */
  moePermute(idx: View, n: number, topK: number, bins: number, counts: View, offsets: View, rowOfPair: View, tokenOfRow: View, pairOfRow: View): void {
    if (anySegmented(idx, counts, offsets, rowOfPair, tokenOfRow, pairOfRow)) [idx, counts, offsets, rowOfPair, tokenOfRow, pairOfRow] = this.one("moePermute", [idx, n, "idx"], [counts, bins, "counts"], [offsets, bins + 1, "offsets"], [rowOfPair, n, "rowOfPair"], [tokenOfRow, n, "tokenOfRow"], [pairOfRow, n, "pairOfRow"]) as [View, View, View, View, View, View];
    const op = "moePermute";
    if (!Number.isInteger(topK) || topK < 1) throw new Error(`webgpu moePermute: topK must be a positive integer, got ${topK}`);
    const ib = this.v(idx, n, op, "idx", I32);
    const cb = this.v(counts, bins, op, "counts", I32);
    const ob = this.v(offsets, bins + 1, op, "offsets", I32);
    const rp = this.v(rowOfPair, n, op, "rowOfPair", I32);
    const tr = this.v(tokenOfRow, n, op, "tokenOfRow", I32);
    const pr = this.v(pairOfRow, n, op, "pairOfRow", I32);
    const scratch = this.scratchBuf("moe_permute", "i32", permuteScratchWords(n, bins));
    this.runAll(moePermuteLaunches(ib, idx.off, n, topK, bins, cb, counts.off, ob, offsets.off, rp, rowOfPair.off, tr, tokenOfRow.off, pr, pairOfRow.off, scratch));
  }

  /** The per-token combine in expert order, one dispatch (wgsl/moe-permute.ts). */
  moeCombine(x: View, xRows: number, rowOfPair: View, weights: View | null, out: View, tokens: number, topK: number, dim: number, accumulate: boolean): void {
    if (anySegmented(x, rowOfPair, weights, out)) {
      const args: RowArg[] = [
        { view: rowOfPair, perRow: topK, io: "in", arg: "rowOfPair", dtypes: I32 },
        { view: out, perRow: dim, io: accumulate ? "inout" : "out", arg: "out", dtypes: F32 },
      ];
      if (weights) args.push({ view: weights, perRow: topK, io: "in", arg: "weights", dtypes: F32 });
      return forRowBlocks(this.host, "moeCombine", tokens, args, [{ view: x, n: xRows * dim, arg: "x", dtypes: F32 }], (_r, c, [rs, os, ws], [xs]) => this.moeCombine(xs!, xRows, rs!, ws ?? null, os!, c, topK, dim, accumulate));
    }
    const op = "moeCombine";
    const xb = this.v(x, xRows * dim, op, "x", F32);
    const rb = this.v(rowOfPair, tokens * topK, op, "rowOfPair", I32);
    const wb = weights ? this.v(weights, tokens * topK, op, "weights", F32) : null;
    const ob = this.v(out, tokens * dim, op, "out", F32);
    this.run(moeCombineLaunch(xb, x.off, xRows, rb, rowOfPair.off, wb, weights?.off ?? 0, ob, out.off, tokens, topK, dim, accumulate));
  }

  gatherAlongRows(x: View, idx: View, out: View, rows: number, cols: number, k: number): void {
    if (anySegmented(x, idx, out)) {
      const args: RowArg[] = [
        { view: x, perRow: cols, io: "in", arg: "x", dtypes: F32 },
        { view: idx, perRow: k, io: "in", arg: "idx", dtypes: I32 },
        { view: out, perRow: k, io: "out", arg: "out", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "gatherAlongRows", rows, args, [], (_r, c, [xs, is, os]) => this.gatherAlongRows(xs!, is!, os!, c, cols, k));
    }
    const op = "gatherAlongRows";
    const xb = this.v(x, rows * cols, op, "x", F32);
    const ib = this.v(idx, rows * k, op, "idx", I32);
    const ob = this.v(out, rows * k, op, "out", F32);
    this.run(gatherAlongRowsLaunch(xb, x.off, ib, idx.off, ob, out.off, rows, cols, k));
  }

  scatterAddAlongRows(dout: View, idx: View, dx: View, rows: number, cols: number, k: number): void {
    if (anySegmented(dout, idx, dx)) {
      const args: RowArg[] = [
        { view: dout, perRow: k, io: "in", arg: "dout", dtypes: F32 },
        { view: idx, perRow: k, io: "in", arg: "idx", dtypes: I32 },
        { view: dx, perRow: cols, io: "inout", arg: "dx", dtypes: F32 },
      ];
      return forRowBlocks(this.host, "scatterAddAlongRows", rows, args, [], (_r, c, [ds, is, xs]) => this.scatterAddAlongRows(ds!, is!, xs!, c, cols, k));
    }
    const op = "scatterAddAlongRows";
    const gb = this.v(dout, rows * k, op, "dout", F32);
    const ib = this.v(idx, rows * k, op, "idx", I32);
    const xb = this.v(dx, rows * cols, op, "dx", F32);
    this.run(scatterAddAlongRowsLaunch(gb, dout.off, ib, idx.off, xb, dx.off, rows, cols, k));
  }

  // ---- optimizer -----------------------------------------------------------------------------

  adamw(param: View, grad: View, m: View, v: View, param16: View | null, n: number, p: AdamWParams): void {
    if (anySegmented(param, grad, m, v, param16, p.scaleFrom)) {
      const args: RowArg[] = [
        { view: param, perRow: 1, io: "inout", arg: "param", dtypes: F32 },
        { view: grad, perRow: 1, io: "in", arg: "grad", dtypes: FLOATS },
        { view: m, perRow: 1, io: "inout", arg: "m", dtypes: F32 },
        { view: v, perRow: 1, io: "inout", arg: "v", dtypes: F32 },
      ];
      if (param16) args.push({ view: param16, perRow: 1, io: "out", arg: "param16", dtypes: ["f16", "bf16"] });
      const fixed = p.scaleFrom ? [{ view: p.scaleFrom, n: 2, arg: "scaleFrom", dtypes: F32 }] : [];
      return forRowBlocks(this.host, "adamw", n, args, fixed, (_s, c, [ps, gs, ms, vs, p16], [sf]) => this.adamw(ps!, gs!, ms!, vs!, p16 ?? null, c, sf ? { ...p, scaleFrom: sf } : p));
    }
    const op = "adamw";
    const pb = this.v(param, n, op, "param", F32);
    const gb = this.v(grad, n, op, "grad", FLOATS);
    const mb = this.v(m, n, op, "m", F32);
    const vb = this.v(v, n, op, "v", F32);
    const p16 = param16 ? this.v(param16, n, op, "param16", ["f16", "bf16"]) : null;
    if (!(p.step >= 1)) throw new Error(`webgpu adamw: step must be ≥ 1 (1-based), got ${p.step}`);
    const sb = p.scaleFrom ? this.v(p.scaleFrom, 2, op, "scaleFrom", F32) : null;
    this.run(adamwLaunch(pb, param.off, gb, grad.off, mb, m.off, vb, v.off, p16, param16?.off ?? 0, n, p, sb ? { buf: sb, off: p.scaleFrom!.off } : null));
  }

  clipScale(partials: View, count: number, out: View, p: ClipScaleParams): void {
    if (anySegmented(partials, out)) [partials, out] = this.one("clipScale", [partials, count, "partials", F32], [out, 3, "out", F32]) as [View, View];
    if (!Number.isInteger(count) || count < 0) throw new Error(`webgpu clipScale: count must be a non-negative integer, got ${count}`);
    if (!(p.lsDiv > 0)) throw new Error(`webgpu clipScale: lsDiv must be > 0, got ${p.lsDiv}`);
    const pb = this.v(partials, count, "clipScale", "partials", F32);
    const ob = this.v(out, 3, "clipScale", "out", F32);
    this.run(clipScaleLaunch(pb, partials.off, count, ob, out.off, p.lsDiv, p.maxNorm));
  }

  lambUpdate(param: View, grad: View, m: View, v: View, update: View, n: number, p: LambParams): void {
    if (anySegmented(param, grad, m, v, update)) return forElementBlocks(this.host, "lambUpdate", n, [{ view: param, io: "in", arg: "param", dtypes: F32 }, { view: grad, io: "in", arg: "grad", dtypes: FLOATS }, { view: m, io: "inout", arg: "m", dtypes: F32 }, { view: v, io: "inout", arg: "v", dtypes: F32 }, { view: update, io: "out", arg: "update", dtypes: F32 }], [], (_s, c, [ps, gs, ms, vs, us]) => this.lambUpdate(ps!, gs!, ms!, vs!, us!, c, p));
    const op = "lambUpdate";
    const pb = this.v(param, n, op, "param", F32);
    const gb = this.v(grad, n, op, "grad", FLOATS);
    const mb = this.v(m, n, op, "m", F32);
    const vb = this.v(v, n, op, "v", F32);
    const ub = this.v(update, n, op, "update", F32);
    this.run(lambUpdateLaunch(pb, param.off, gb, grad.off, mb, m.off, vb, v.off, ub, update.off, n, p));
  }

  sumSquares(x: View, out: View, n: number): void {
    if (anySegmented(x, out)) {
      // one partial sum per segment block, then their sum in block order (rounding differs from one
      // binding's workgroup partials: the terms are the same, the association is not)
      this.ledger.check(x, n, "sumSquares", "x", FLOATS);
      const o = rebase(out, 1, "sumSquares", "out");
      const blocks: [number, number][] = [];
      forElementBlocks(this.host, "sumSquares", n, [{ view: x, io: "in", arg: "x", dtypes: FLOATS }], [], (s0, c) => blocks.push([s0, c]));
      const part = this.ledger.alloc("f32", blocks.length, "other", false);
      blocks.forEach(([s0, c], i) => this.sumSquares(rebase({ buf: x.buf, off: x.off + s0 }, c, "sumSquares", "x"), { buf: part, off: i }, c));
      this.reduce("sum", { buf: part, off: 0 }, o, 1, blocks.length, 1);
      return this.free(part);
    }
    const xb = this.v(x, n, "sumSquares", "x", FLOATS);
    const ob = this.v(out, 1, "sumSquares", "out", F32);
    const scratch = this.scratchBuf("sumsq_partials", "f32", sumSquaresPartials(n));
    this.runAll(sumSquaresLaunches(xb, x.off, ob, out.off, n, scratch));
  }

  nonFinite(x: View, out: View, n: number): void {
    if (anySegmented(x, out)) {
      const o = rebase(out, 1, "nonFinite", "out");
      const ob = this.v(o, 1, "nonFinite", "out", ["u32"]);
      this.run(fillLaunch(ob, o.off, 1, 0));
      return forElementBlocks(this.host, "nonFinite", n, [{ view: x, io: "in", arg: "x", dtypes: FLOATS }], [], (_s, c, [xs]) => this.run(nonFiniteLaunch(this.v(xs!, c, "nonFinite", "x", FLOATS), xs!.off, ob, o.off, c)));
    }
    const xb = this.v(x, n, "nonFinite", "x", FLOATS);
    const ob = this.v(out, 1, "nonFinite", "out", ["u32"]);
    this.run(fillLaunch(ob, out.off, 1, 0));
    this.run(nonFiniteLaunch(xb, x.off, ob, out.off, n));
  }
}
