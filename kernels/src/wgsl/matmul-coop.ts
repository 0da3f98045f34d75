/**
 * Running the tensor-core matmul (matmul-coop-wgsl.ts) on a WebGPU device of this binding:
 * support check, pipelines (one per kernel variant, explicit layouts), and dispatch encoding.
 *
 * Support needs the library that can enable experimental features (ours: ZEROMOE_WGPU=coop, see
 * kernels/src/ffi/library.ts), a device created with "shader-f16" and "wgpu-cooperative-matrix",
 * a driver configuration 16×16×16 f16→f32 (queried with cooperativeMatrixProperties), subgroups
 * of 32 and enough workgroup memory.
 */
import { cooperativeMatrixProperties, type CoopMatrixConfig } from "../ffi/cooperative-matrix.ts";
import { COOP_PARAM_NAMES, COOP_TILE, coopKernelKey, coopWorkgroupBytes, matmulCoopWGSL, type CoopMatmulOptions, type CoopStaging } from "./matmul-coop-wgsl.ts";
import { COOP_DEFAULT_TILE, coopTileName, coopTileThreads, type CoopTile } from "./matmul-coop-tile.ts";
import { COOP_SPLIT_K_REDUCE_WG, coopSplitKChunks, coopSplitKReduceWGSL } from "./matmul-coop-split-k.ts";

/** One dispatch of a prepared call. */
export interface CoopDispatch {
  pipeline: GPUComputePipeline;
  bindGroup: GPUBindGroup;
  workgroups: [number, number, number];
}

/** Device features the tensor-core matmul needs. */
export const COOP_FEATURES: readonly GPUFeatureName[] = ["shader-f16", "wgpu-cooperative-matrix" as GPUFeatureName];

/** Whether an adapter can run the tensor-core matmul, and why not. */
export interface CoopSupport {
  ok: boolean;
  reason: string;
  /** The driver's configurations (null: the library cannot list them). */
  configs: CoopMatrixConfig[] | null;
}

/**
 * Check `adapter` for the tensor-core matmul: both features, a 16×16×16 f16→f32 configuration,
 * subgroup size 32 (adapter info subgroupMinSize ≤ 32 ≤ subgroupMaxSize) and the workgroup memory
 * of the largest variant. Never throws.
 */
export function coopSupport(adapter: GPUAdapter): CoopSupport {
  let configs: CoopMatrixConfig[] | null = null;
  try {
    configs = cooperativeMatrixProperties(adapter);
  } catch (e) {
    return { ok: false, reason: (e as Error).message, configs: null };
  }
  for (const f of COOP_FEATURES) {
    if (adapter.features.has(f)) continue;
    const hint = f.startsWith("wgpu-") ? (configs === null ? " (the prebuilt wgpu-native never enables it; run with ZEROMOE_WGPU=coop)" : " (the driver does not offer VK_KHR_cooperative_matrix)") : "";
    return { ok: false, reason: `the adapter lacks feature '${f}'${hint}`, configs };
  }
  if (configs === null) return { ok: false, reason: "the loaded library cannot list cooperative-matrix configurations (run with ZEROMOE_WGPU=coop)", configs };
  if (!configs.some((c) => c.M === 16 && c.N === 16 && c.K === 16 && c.abType === "f16" && c.crType === "f32")) {
    return { ok: false, reason: `the driver offers no 16x16x16 f16→f32 configuration (offers ${configs.length})`, configs };
  }
  const info = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
  const lo = info.subgroupMinSize ?? 0;
  const hi = info.subgroupMaxSize ?? 0;
  if (!(lo <= COOP_TILE.SUBGROUP && COOP_TILE.SUBGROUP <= hi)) return { ok: false, reason: `subgroup size ${lo}..${hi} does not admit ${COOP_TILE.SUBGROUP}`, configs };
  const need = Math.max(coopWorkgroupBytes({ transA: false, transB: false }), coopWorkgroupBytes({ transA: true, transB: true }), coopWorkgroupBytes({ transA: false, transB: true }), coopWorkgroupBytes({ transA: true, transB: false }));
  if (adapter.limits.maxComputeWorkgroupStorageSize < need) return { ok: false, reason: `maxComputeWorkgroupStorageSize ${adapter.limits.maxComputeWorkgroupStorageSize} < ${need} bytes`, configs };
  return { ok: true, reason: "16x16x16 f16→f32 offered", configs };
}

/** One matmul for {@link CoopMatmul.encode}: out[b] (+)= op(A[b])·op(B[b]) over `batch` (default 1). */
export interface CoopMatmulCall {
  M: number;
  N: number;
  K: number;
  batch?: number;
  transA?: boolean;
  transB?: boolean;
  accumulate?: boolean;
  /** Element offsets of A, B, out (default 0) and batch strides (default the packed sizes). */
  aOff?: number;
  bOff?: number;
  outOff?: number;
  strideA?: number;
  strideB?: number;
  strideOut?: number;
  /** Elements per global load of the "regs" staging (default: 4 when aligned, else 1; 8 = 16-byte
   * loads of f16 operands whose rows, offsets and strides are multiples of 8). */
  vec?: 1 | 4 | 8;
  /** How tiles reach the multiply (matmul-coop-wgsl.ts CoopMatmulOptions.staging; default "regs").
   * "coop" and "none" need f16 operands and M, N, K multiples of the block's BM, BN, BK (they read
   * whole fragments unguarded). */
  staging?: CoopStaging;
  /** Block shape (default {@link COOP_DEFAULT_TILE}). */
  tile?: CoopTile;
  /** "scratch", "direct" (throws unless M, N are multiples of 16 and the out offset and batch
   * stride multiples of 4), or "auto" (default: direct where allowed). */
  epilogue?: "scratch" | "direct" | "auto";
  /** Guard of the global reads (matmul-coop-wgsl.ts CoopMatmulOptions.guard; default "select"). */
  guard?: "branch" | "select";
}

/** Whether the "direct" epilogue (coopStoreT straight into out) is correct for a call: every
 * 16×16 fragment wholly inside or outside out, and out's fragment rows 16-byte aligned. */
export function coopDirectEpilogueOk(call: Pick<CoopMatmulCall, "M" | "N" | "outOff" | "strideOut" | "batch">): boolean {
  const batch = call.batch ?? 1;
  return call.M % 16 === 0 && call.N % 16 === 0 && (call.outOff ?? 0) % 4 === 0 && (batch <= 1 || (call.strideOut ?? call.M * call.N) % 4 === 0);
}

/** Choices of {@link CoopMatmul} that apply to all its pipelines. */
export interface CoopMatmulConfig {
  /** Compile without naga's runtime checks (createShaderModuleTrusted; our FFI binding only): the
   * kernel guards every global read and write itself (matmul-coop-wgsl.ts). Default false. */
  trusted?: boolean;
  /** Emulated cooperative matrices (tests on devices without them; matmul-coop-wgsl.ts). */
  emulate?: boolean;
}

/** Pipelines and dispatch of the tensor-core matmul on one device (created with {@link COOP_FEATURES},
 * a maxComputeWorkgroupStorageSize of at least {@link coopWorkgroupBytes}, and for tiles of more
 * than 8 subgroups maxComputeInvocationsPerWorkgroup / maxComputeWorkgroupSizeX to match). */
export class CoopMatmul {
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly layout: GPUBindGroupLayout;
  private readonly pipelineLayout: GPUPipelineLayout;

  constructor(
    readonly device: GPUDevice,
    readonly config: CoopMatmulConfig = {},
  ) {
    const storage = (binding: number, type: GPUBufferBindingType): GPUBindGroupLayoutEntry => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } });
    this.layout = device.createBindGroupLayout({
      label: "matmul_coop",
      entries: [storage(0, "uniform"), storage(1, "read-only-storage"), storage(2, "read-only-storage"), storage(3, "storage")],
    });
    this.pipelineLayout = device.createPipelineLayout({ label: "matmul_coop", bindGroupLayouts: [this.layout] });
  }

  /** The pipeline of a variant (compiled on first use). */
  pipeline(o: CoopMatmulOptions): GPUComputePipeline {
    const opts: CoopMatmulOptions = { ...o, emulate: !!this.config.emulate };
    const key = coopKernelKey(opts);
    let p = this.pipelines.get(key);
    if (!p) {
      const need = coopWorkgroupBytes(opts);
      const have = this.device.limits.maxComputeWorkgroupStorageSize;
      if (need > have) throw new Error(`matmul_coop: tile ${coopTileName(opts.tile ?? COOP_DEFAULT_TILE)} needs ${need} bytes of workgroup memory, the device allows ${have}`);
      const threads = coopTileThreads(opts.tile ?? COOP_DEFAULT_TILE);
      const lim = Math.min(this.device.limits.maxComputeInvocationsPerWorkgroup, this.device.limits.maxComputeWorkgroupSizeX);
      if (threads > lim) throw new Error(`matmul_coop: tile ${coopTileName(opts.tile ?? COOP_DEFAULT_TILE)} needs workgroups of ${threads} invocations, the device allows ${lim} (request maxComputeInvocationsPerWorkgroup and maxComputeWorkgroupSizeX)`);
      const desc = { label: key, code: matmulCoopWGSL(opts) };
      // the FFI binding's non-standard method (ffi/device.ts), reached through the device so this
      // file stays free of bun:ffi imports (the backend that imports it also runs under Deno)
      const trustedDevice = this.device as unknown as { createShaderModuleTrusted?(d: GPUShaderModuleDescriptor, checks: { boundsChecks: boolean; forceLoopBounding: boolean }): GPUShaderModule };
      if (this.config.trusted && typeof trustedDevice.createShaderModuleTrusted !== "function") throw new TypeError("matmul_coop: trusted modules need the FFI binding's device.createShaderModuleTrusted; this WebGPU implementation has none");
      const module = this.config.trusted ? trustedDevice.createShaderModuleTrusted!(desc, { boundsChecks: false, forceLoopBounding: false }) : this.device.createShaderModule(desc);
      p = this.device.createComputePipeline({ label: key, layout: this.pipelineLayout, compute: { module, entryPoint: "main" } });
      this.pipelines.set(key, p);
    }
    return p;
  }

  /**
   * A bind group + uniform buffer for one call on buffers `a`, `b` (elements `input`: f16 or
   * f32) and `out` (f32). Reusable for repeated dispatches of the same call.
   * @throws Error on sizes that are not non-negative integers or exceed 2³² elements, vec 4 or the
   *   direct epilogue where the call's alignment does not allow them, or a tile needing more
   *   workgroup memory than the device allows.
   */
  prepare(call: CoopMatmulCall, input: "f16" | "f32", a: GPUBuffer, b: GPUBuffer, out: GPUBuffer): { pipeline: GPUComputePipeline; bindGroup: GPUBindGroup; workgroups: [number, number, number]; params: GPUBuffer } {
    const { M, N, K } = call;
    const batch = call.batch ?? 1;
    for (const [k, v] of Object.entries({ M, N, K, batch })) if (!Number.isInteger(v) || v < 0) throw new Error(`matmul_coop: ${k} must be a non-negative integer, got ${v}`);
    const vals = [M, N, K, call.aOff ?? 0, call.bOff ?? 0, call.outOff ?? 0, call.strideA ?? M * K, call.strideB ?? K * N, call.strideOut ?? M * N, batch];
    if (vals.some((v) => v >= 2 ** 32)) throw new Error("matmul_coop: sizes, offsets and strides must stay below 2^32 elements");
    const params = this.device.createBuffer({ label: "matmul_coop_params", size: 4 * COOP_PARAM_NAMES.length, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.device.queue.writeBuffer(params, 0, new Uint32Array(vals));
    // vec4 global loads when every row, offset and batch stride of A and B is a multiple of 4
    const rowA = call.transA ? M : K, rowB = call.transB ? K : N;
    const alignedTo = (q: number) => [rowA, rowB, vals[3]!, vals[4]!, ...(batch > 1 ? [vals[6]!, vals[7]!] : [])].every((v) => v % q === 0);
    const aligned = alignedTo(4);
    const vec = call.vec ?? (aligned ? 4 : 1);
    if (vec === 4 && !aligned) throw new Error(`matmul_coop: vec 4 needs A/B rows (${rowA}, ${rowB}), offsets and batch strides that are multiples of 4`);
    if (vec === 8 && (input !== "f16" || !alignedTo(8))) throw new Error(`matmul_coop: vec 8 needs f16 operands and A/B rows (${rowA}, ${rowB}), offsets and batch strides that are multiples of 8`);
    const staging = call.staging ?? "regs";
    const t0 = call.tile ?? COOP_DEFAULT_TILE;
    if (staging !== "regs" && (input !== "f16" || M % t0.BM !== 0 || N % t0.BN !== 0 || K % t0.BK !== 0)) throw new Error(`matmul_coop: staging "${staging}" needs f16 operands and M, N, K multiples of the block ${coopTileName(t0)} (got ${M}x${N}x${K})`);
    const directOk = coopDirectEpilogueOk(call);
    const ep = call.epilogue ?? "auto";
    if (ep === "direct" && !directOk) throw new Error(`matmul_coop: the direct epilogue needs M, N multiples of 16 and out offset/batch stride multiples of 4 (M ${M}, N ${N})`);
    const epilogue = ep === "scratch" || !directOk ? "scratch" : "direct";
    const tile = call.tile ?? COOP_DEFAULT_TILE;
    const pipeline = this.pipeline({ input, transA: !!call.transA, transB: !!call.transB, accumulate: !!call.accumulate, vec: staging === "regs" ? vec : 1, tile, epilogue, guard: call.guard, staging });
    const bindGroup = this.device.createBindGroup({
      layout: this.layout,
      entries: [
        { binding: 0, resource: { buffer: params } },
        { binding: 1, resource: { buffer: a } },
        { binding: 2, resource: { buffer: b } },
        { binding: 3, resource: { buffer: out } },
      ],
    });
    return { pipeline, bindGroup, workgroups: [Math.ceil(N / tile.BN), Math.ceil(M / tile.BM), batch], params };
  }

  /**
   * Split-K (matmul-coop-split-k.ts) for the weight-gradient layout (transA, not transB, batch 1,
   * zero offsets): K cut into `splits` chunks, the chunks as one batched coop matmul into a scratch
   * [splits, M, N] (plus one launch for a ragged last chunk), then the reduce into out (adding to
   * it with `accumulate`). Returns the dispatches in order and the buffers to destroy afterwards.
   * @throws Error for another layout, a batch, offsets, or splits < 1.
   */
  prepareSplitK(call: CoopMatmulCall, splits: number, input: "f16" | "f32", a: GPUBuffer, b: GPUBuffer, out: GPUBuffer): { dispatches: CoopDispatch[]; buffers: GPUBuffer[] } {
    const { M, N, K } = call;
    if (!call.transA || call.transB || (call.batch ?? 1) !== 1 || call.aOff || call.bOff || call.outOff) throw new Error("matmul_coop split-K: only transA, not transB, batch 1, zero offsets");
    const tile = call.tile ?? COOP_DEFAULT_TILE;
    const { chunk, full, last } = coopSplitKChunks(K, splits, tile.BK);
    const slabs = full + (last > 0 ? 1 : 0);
    const scratch = this.device.createBuffer({ label: "matmul_coop_split_k", size: Math.max(4, slabs * M * N * 4), usage: GPUBufferUsage.STORAGE });
    const base = { M, N, transA: true, transB: false, accumulate: false, tile, epilogue: call.epilogue, vec: call.vec, guard: call.guard, staging: call.staging } as const;
    const parts = [this.prepare({ ...base, K: chunk, batch: full, strideA: chunk * M, strideB: chunk * N, strideOut: M * N }, input, a, b, scratch)];
    if (last > 0) parts.push(this.prepare({ ...base, K: last, aOff: full * chunk * M, bOff: full * chunk * N, outOff: full * M * N }, input, a, b, scratch));
    const acc = !!call.accumulate;
    let reduce = this.reducePipelines.get(acc);
    if (!reduce) {
      reduce = this.device.createComputePipeline({ label: "coop_split_k_reduce", layout: "auto", compute: { module: this.device.createShaderModule({ code: coopSplitKReduceWGSL(acc) }), entryPoint: "main" } });
      this.reducePipelines.set(acc, reduce);
    }
    const params = this.device.createBuffer({ label: "coop_split_k_reduce_params", size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.device.queue.writeBuffer(params, 0, new Uint32Array([M * N, slabs, 0, 0]));
    const bindGroup = this.device.createBindGroup({
      layout: reduce.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: params } },
        { binding: 1, resource: { buffer: scratch } },
        { binding: 2, resource: { buffer: out } },
      ],
    });
    return {
      dispatches: [...parts.map((p) => ({ pipeline: p.pipeline, bindGroup: p.bindGroup, workgroups: p.workgroups })), { pipeline: reduce, bindGroup, workgroups: [Math.ceil((M * N) / COOP_SPLIT_K_REDUCE_WG), 1, 1] }],
      buffers: [scratch, params, ...parts.map((p) => p.params)],
    };
  }

  private readonly reducePipelines = new Map<boolean, GPUComputePipeline>();
}
