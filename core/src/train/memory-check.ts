/**
 * Up-front memory check of the trainer: before anything is allocated, compare the job's model-state
 * estimate (memory-estimate.ts, docs/domain.md §1) with what the backend can hold, and refuse a job that
 * cannot fit with a {@link MemoryBudgetError} that names the estimate, the limit and what to change
 * — instead of allocating for half a minute and dying with "cpu alloc … Out of memory" or the OOM
 * killer.
 *
 * Limits:
 * - host memory (backend `cpu`, and `webgpu` on a CPU-type adapter such as Mesa's lavapipe, whose
 *   buffers are host memory): the memory available when the run starts (os.freemem(), which is
 *   /proc/meminfo MemAvailable on Linux, or less when a cgroup limit is readable) shared by the
 *   world_size ranks, which are Workers of this one process;
 * - the largest single buffer: `webgpu` min(maxBufferSize, maxStorageBufferBindingSize) of the
 *   device; `cpu` {@link CPU_MAX_BUFFER_BYTES} — against the largest buffer the job allocates for a
 *   unit (largest-buffer.ts: the unit in f32, or for a 16-bit job's experts, which have no f32
 *   working copy, their 16-bit storage, f32 optimizer shard or grouped weight stack).
 * Activations, padding and communication buffers come on top of the estimate, so a job that passes
 * may still run short; one that fails cannot run.
 */
import { existsSync, readFileSync } from "node:fs";
import { freemem } from "node:os";
import type { Backend } from "@zeromoe/kernels";
import { formatByteSize, parseByteSize } from "../config/byte-size.ts";
import { ConfigError } from "../config/errors.ts";
import type { JobConfig } from "../config/types.ts";
import { estimateModelState, type MemoryContributor, type ModelStateEstimate } from "./memory-estimate.ts";
import { estimatePeak, type PeakEstimate } from "./memory-peak.ts";

/** The plugins whose memory contributions apply to a job (memory-estimate.ts): `plugins` for the job
 * itself, `pluginsFor(variant)` for a variant of it (another ZeRO stage, precision or world_size)
 * when looking for a remedy; without `pluginsFor` only precision and world_size are varied. */
export interface MemoryPlugins {
  plugins: readonly MemoryContributor[];
  pluginsFor?: (variant: JobConfig) => readonly MemoryContributor[];
}

/** A job's model states do not fit the backend. A {@link ConfigError} (name "ConfigError") on the
 * key to change, so the train CLI treats it as the user error it is — message only, exit status 2 —
 * also when a rank throws it (launch passes errors on as "<name>: <message>"). */
export class MemoryBudgetError extends ConfigError {
  constructor(path: string, message: string) {
    super([{ path, message }], "the job does not fit in memory");
  }
}

/** Largest typed array of Bun 1.4.5 (JavaScriptCore), bytes: `new Float32Array(2 ** 30)` works,
 * `new Float32Array(2 ** 30 + 1)` throws "RangeError: Out of memory" (measured 2026-11-29 on a
 * host with 24 GB free). The cpu backend keeps every buffer in one typed array. */
export const CPU_MAX_BUFFER_BYTES = 2 ** 32;

/** Host memory available to this process, bytes, and where the figure comes from. */
export interface HostMemory {
  bytes: number;
  source: string;
}

/** Read a cgroup file as a byte count; null when missing, "max" or unreadable. */
function readCgroupBytes(path: string): number | null {
  try {
    if (!existsSync(path)) return null;
    const s = readFileSync(path, "utf8").trim();
    const v = Number(s);
    return s !== "" && Number.isFinite(v) ? v : null;
  } catch {
    return null;
  }
}

/** Bytes of `key` in a cgroup memory.stat file, or 0. */
function readCgroupStat(path: string, key: string): number {
  try {
    const line = readFileSync(path, "utf8").split("\n").find((l) => l.startsWith(key + " "));
    return line ? Number(line.slice(key.length + 1)) || 0 : 0;
  } catch {
    return 0;
  }
}

/**
 * Host memory this process can still use: os.freemem() (Linux: MemAvailable), or the room left
 * under the cgroup's limit when that is smaller — cgroup v2 `memory.max − (memory.current −
 * inactive_file)` under /sys/fs/cgroup, or v1 `memory.limit_in_bytes − usage_in_bytes` under
 * /sys/fs/cgroup/memory; or the environment's ZEROMOE_HOST_MEMORY_LIMIT when that is smaller.
 * `root` replaces /sys/fs/cgroup (tests).
 * @throws RangeError when ZEROMOE_HOST_MEMORY_LIMIT is set and not a size.
 */
export function readHostAvailableMemory(root = "/sys/fs/cgroup"): HostMemory {
  let best: HostMemory = { bytes: freemem(), source: "os.freemem()" };
  // an operator's (or a supervisor's) cap below what the machine has: ZEROMOE_HOST_MEMORY_LIMIT
  // in bytes or a size ("768MiB"); checks then refuse before allocating what the cap cannot hold
  const cap = process.env.ZEROMOE_HOST_MEMORY_LIMIT;
  if (cap !== undefined && cap !== "") {
    const b = parseByteSize(/^\d+$/.test(cap) ? Number(cap) : cap);
    if (typeof b !== "number" || !(b > 0)) throw new RangeError(`ZEROMOE_HOST_MEMORY_LIMIT=${cap.slice(0, 40)}: expected a byte count or a size like "768MiB"`);
    if (b < best.bytes) best = { bytes: b, source: "ZEROMOE_HOST_MEMORY_LIMIT" };
  }
  const max2 = readCgroupBytes(`${root}/memory.max`);
  const cur2 = readCgroupBytes(`${root}/memory.current`);
  if (max2 !== null && cur2 !== null) {
    const room = max2 - Math.max(0, cur2 - readCgroupStat(`${root}/memory.stat`, "inactive_file"));
    if (room < best.bytes) best = { bytes: Math.max(0, room), source: `cgroup ${root}/memory.max − memory.current` };
  }
  const max1 = readCgroupBytes(`${root}/memory/memory.limit_in_bytes`);
  const cur1 = readCgroupBytes(`${root}/memory/memory.usage_in_bytes`);
  if (max1 !== null && cur1 !== null && max1 - cur1 < best.bytes) best = { bytes: Math.max(0, max1 - cur1), source: `cgroup ${root}/memory/memory.limit_in_bytes − usage_in_bytes` };
  return best;
}

/** What a backend can hold. */
export interface MemoryLimits {
  /** Backend name, for messages. */
  backend: "cpu" | "webgpu";
  /** Host memory shared by all ranks of this process, or null when the backend's memory is not
   * host memory (a discrete GPU: WebGPU does not report its size). */
  host: HostMemory | null;
  /** Largest single buffer, bytes, and where that limit comes from. */
  maxBufferBytes: number;
  maxBufferSource: string;
}

/** Limits of the cpu backend with `host` memory available. */
export function cpuMemoryLimits(host: HostMemory): MemoryLimits {
  return { backend: "cpu", host, maxBufferBytes: CPU_MAX_BUFFER_BYTES, maxBufferSource: "the largest typed array of Bun" };
}

/**
 * Limits of `be`: cpu → `host` and {@link CPU_MAX_BUFFER_BYTES}; webgpu → the device's
 * min(maxBufferSize, maxStorageBufferBindingSize), plus `host` when the adapter type is "cpu".
 */
export function backendMemoryLimits(be: Backend, host: HostMemory): MemoryLimits {
  if (be.info.name === "cpu") return cpuMemoryLimits(host);
  const lim = (be as { device?: { limits?: { maxBufferSize?: number; maxStorageBufferBindingSize?: number } } }).device?.limits;
  const maxBuf = lim?.maxBufferSize ?? Infinity;
  const maxBind = lim?.maxStorageBufferBindingSize ?? Infinity;
  return {
    backend: "webgpu",
    host: be.info.adapterType === "cpu" ? host : null,
    maxBufferBytes: Math.min(maxBuf, maxBind),
    maxBufferSource: maxBind < maxBuf ? `the device's maxStorageBufferBindingSize` : `the device's maxBufferSize`,
  };
}

/** Bytes as GB (1e9 bytes, as docs/domain.md §1 states them), two significant decimals. */
export function gb(bytes: number): string {
  return `${(bytes / 1e9).toFixed(bytes >= 1e10 ? 1 : 2)} GB`;
}

/** `config` with some of stage / mixed precision / world_size replaced. */
function variant(config: JobConfig, stage: 0 | 1 | 2 | 3, bf16: boolean, worldSize: number): JobConfig {
  return {
    ...config,
    world_size: worldSize,
    zero_optimization: { ...config.zero_optimization, stage },
    bf16: { enabled: bf16 || config.bf16.enabled },
  };
}

/** Whether the estimate fits the host share of each rank (device states plus what plugins keep in
 * host memory: the ranks are Workers of this one process). */
function fitsHost(e: ModelStateEstimate, host: HostMemory): boolean {
  return (e.total + e.host) * e.worldSize <= host.bytes;
}

/** Bytes as MiB/GiB (binary units, as `max_device_memory` is usually written) with the exact count. */
function binBytes(bytes: number): string {
  return `${formatByteSize(Math.round(bytes))} (${Math.round(bytes)} bytes)`;
}

/**
 * The device memory budget (`max_device_memory`, `--max-device-memory`): the model states this
 * rank keeps on the device (params + grads + optim after the plugins' contributions: a ZeRO stage
 * shards them, offload moves optimizer states to the host) must fit it. Activations and
 * communication buffers come on top (the backend's allocator enforces the whole budget at run
 * time). No budget: nothing to check.
 * @throws MemoryBudgetError on `max_device_memory` naming the estimate, the budget and the fixes —
 *   offloading the optimizer states first (with the device bytes it leaves), then ZeRO stage 3 with it,
 *   then ZeRO stage 3 with the parameters offloaded too
 */
export function checkDeviceBudget(config: JobConfig, mp: MemoryPlugins = { plugins: [] }): ModelStateEstimate {
  const e = estimateModelState(config, mp.plugins);
  const budget = config.max_device_memory;
  if (budget === null || e.total <= budget) return e;
  const z = config.zero_optimization;
  const fixes: string[] = [];
  const tryVariant = (stage: 0 | 1 | 2 | 3, what: string, param = false) => {
    const v: JobConfig = { ...config, zero_optimization: { ...z, stage, offload_optimizer: { ...z.offload_optimizer, device: "cpu", ratio: 1 }, ...(param ? { offload_param: { ...z.offload_param, device: "cpu" as const } } : {}) } };
    const plugins = mp.pluginsFor ? mp.pluginsFor(v) : mp.plugins;
    let ve = estimateModelState(v, plugins);
    // when no installed plugin's contribution moved the optimizer states to the host (the plugin
    // that would is not installed), estimate the variant as it would place them: every optimizer
    // byte on the host (core names no plugin; it reads the contributions' `host` bytes)
    if (ve.host === 0 && ve.optim > 0) ve = { ...ve, total: ve.params + ve.grads, host: ve.optim, optim: 0 };
    fixes.push(`${what} → ${binBytes(ve.total)} on the device${ve.total <= budget ? "" : " (still over)"}`);
    return ve.total <= budget;
  };
  const offloaded = z.offload_optimizer.device !== "none" && z.offload_optimizer.ratio === 1;
  if (!offloaded) tryVariant(z.stage === 0 ? 1 : z.stage, `offload the optimizer states: zero_optimization.offload_optimizer.device "cpu"${z.stage === 0 ? " with zero_optimization.stage 1" : ""}`);
  if (z.stage !== 3) tryVariant(3, `zero_optimization.stage 3 with offload_optimizer.device "cpu"`);
  if (z.offload_param.device === "none") tryVariant(3, `zero_optimization.stage 3 with offload_optimizer.device and offload_param.device "cpu"`, true);
  throw new MemoryBudgetError(
    "max_device_memory",
    `model states need ${binBytes(e.total)} per rank on the device (params ${binBytes(e.params)} + grads ${binBytes(e.grads)} + optimizer states ${binBytes(e.optim)}; ZeRO stage ${e.stage}, ${e.mixed ? "mixed precision" : "fp32"}, world_size ${e.worldSize}${e.host > 0 ? `; ${binBytes(e.host)} already offloaded to the host` : ""}) but max_device_memory is ${binBytes(budget)}; activations come on top. ${fixes.length > 0 ? `To fit: ${fixes.join("; or ")}.` : "Nothing left to offload: raise max_device_memory or use more ranks."}`,
  );
}

/** Changes of ZeRO stage, bf16 and world_size that make the host check pass, least change first
 * (at most three). */
function hostRemedies(config: JobConfig, host: HostMemory, mp: MemoryPlugins): string[] {
  const out: string[] = [];
  const stage0 = config.zero_optimization.stage;
  const mixed = config.bf16.enabled || config.fp16.enabled;
  // the smallest world an expert layout runs at: one replica of the experts, ep_size × etp_size ranks
  const P = (config.moe?.ep_size ?? 1) * (config.moe?.etp_size ?? 1);
  const worlds = [config.world_size];
  if (P < config.world_size) worlds.push(P);
  for (const n of worlds) {
    for (const bf of mixed ? [false] : [false, true]) {
      for (let s = stage0; s <= (mp.pluginsFor ? 3 : stage0); s++) {
        if (n === config.world_size && !bf && s === stage0) continue;
        const v = variant(config, s as 0 | 1 | 2 | 3, bf, n);
        const e = estimateModelState(v, mp.pluginsFor ? mp.pluginsFor(v) : mp.plugins);
        if (!fitsHost(e, host)) continue;
        const what = [s !== stage0 ? `zero_optimization.stage ${s}` : "", bf ? `bf16.enabled true` : "", n !== config.world_size ? `world_size ${n}` : ""].filter((x) => x).join(" + ");
        out.push(`${what} (${gb(e.total)} per rank)`);
        break; // the lowest stage that fits with this precision and world size
      }
    }
  }
  return out.slice(0, 3);
}

/**
 * Check that `config`'s model states, as its plugins partition them (`mp`; memory-estimate.ts),
 * fit `limits` (see the module comment); returns the estimate.
 * @throws MemoryBudgetError naming the estimate, the limit and what to change.
 */
export function checkModelStateFits(config: JobConfig, limits: MemoryLimits, mp: MemoryPlugins = { plugins: [] }): ModelStateEstimate {
  checkDeviceBudget(config, mp);
  const e = estimateModelState(config, mp.plugins);
  const N = e.worldSize;
  const b = e.perParameter;
  const what = `${config.model.model_type}, ${(e.parameters / 1e9).toFixed(2)}e9 parameters${e.expertParameters > 0 ? ` (${(e.expertParameters / 1e9).toFixed(2)}e9 in experts, ep_size ${e.epSize})` : ""}; ZeRO stage ${e.stage}, ${e.mixed ? "mixed precision" : "fp32"}: ${b.param} + ${b.grad} + ${b.optim} bytes per parameter; world_size ${N}`;
  if (limits.host !== null && !fitsHost(e, limits.host)) {
    const share = limits.host.bytes / N;
    const fixes = hostRemedies(config, limits.host, mp);
    const fix = fixes.length > 0
      ? `To fit, change: ${fixes.join("; or ")}.`
      : `No ZeRO stage, bf16 or world_size fits: the ranks are Workers of this one process, so they need at least 16 bytes × ${(e.parameters / 1e9).toFixed(2)}e9 parameters = ${gb(16 * e.parameters)} of host memory together (ZeRO-3); use a smaller model or a host with more memory.`;
    throw new MemoryBudgetError(
      "zero_optimization.stage",
      `model states need ${gb(e.total)} per rank (${what}) but the ${limits.backend} backend has ${gb(share)} per rank (${gb(limits.host.bytes)} of host memory available by ${limits.host.source}, shared by the ${N} rank${N === 1 ? "" : "s"} of this process); activations come on top. ${fix}`,
    );
  }
  if (e.largestBufferBytes > limits.maxBufferBytes) {
    const lb = e.largestBuffer;
    const u = lb.unit;
    const dims = u.kind === "expert" ? "model.hidden_size, model.intermediate_size / moe_intermediate_size" : `model.hidden_size, model.intermediate_size${u.name === "embed" || u.name === "head" ? ", model.vocab_size" : ""}`;
    const layout = lb.wholeF32
      ? "ZeRO stage, world_size and bf16 do not change this: make the unit smaller"
      : u.kind === "expert" && /optimizer/.test(lb.what)
        ? "shard the optimizer states (zero_optimization.stage ≥ 1 with more ranks per expert replica), offload them (zero_optimization.offload_optimizer.device \"cpu\") or make the experts smaller"
        : "fewer experts per rank (moe.ep_size), a larger moe.etp_size, or smaller experts";
    throw new MemoryBudgetError(
      "model",
      `unit ${u.name} of ${u.numel} elements needs one ${gb(lb.bytes)} buffer (${lb.what}) but the ${limits.backend} backend's largest buffer is ${gb(limits.maxBufferBytes)} (${limits.maxBufferSource}); ${layout} (${dims})${limits.backend === "webgpu" && lb.bytes <= CPU_MAX_BUFFER_BYTES ? `, or set backend "cpu" (buffers up to ${gb(CPU_MAX_BUFFER_BYTES)})` : ""}.`,
    );
  }
  return e;
}

/** `config` with a smaller micro-batch, activation checkpointing, ZeRO-3 or optimizer offload —
 * the remedies {@link checkPeakFits} tries, least change first. */
function peakRemedies(config: JobConfig): { what: string; job: JobConfig }[] {
  const out: { what: string; job: JobConfig }[] = [];
  const micro = config.train_micro_batch_size_per_gpu;
  const z = config.zero_optimization;
  // smaller micro-batches that keep the global batch (divisors of the micro-batch), largest first
  for (let mb = micro - 1; mb >= 1 && out.length < 2; mb--) {
    if (micro % mb !== 0) continue;
    const accum = (config.gradient_accumulation_steps * micro) / mb;
    out.push({ what: `train_micro_batch_size_per_gpu ${mb} with gradient_accumulation_steps ${accum}`, job: { ...config, train_micro_batch_size_per_gpu: mb, gradient_accumulation_steps: accum } });
  }
  if (!config.activation_checkpointing.enabled) out.push({ what: "activation_checkpointing.enabled true", job: { ...config, activation_checkpointing: { ...config.activation_checkpointing, enabled: true } } });
  if (z.stage !== 3 && config.world_size > 1) out.push({ what: "zero_optimization.stage 3", job: { ...config, zero_optimization: { ...z, stage: 3 } } });
  if (z.offload_optimizer.device === "none") out.push({ what: `zero_optimization.offload_optimizer.device "cpu"${z.stage === 0 ? " with stage 1" : ""}`, job: { ...config, zero_optimization: { ...z, stage: z.stage === 0 ? 1 : z.stage, offload_optimizer: { ...z.offload_optimizer, device: "cpu", ratio: 1 } } } });
  return out;
}

/** The peak estimate of `config` (memory-peak.ts) with its plugins' model states. */
export function estimateJobPeak(config: JobConfig, limits: MemoryLimits, mp: MemoryPlugins = { plugins: [] }): PeakEstimate {
  const plugins = mp.pluginsFor ? mp.pluginsFor(config) : mp.plugins;
  return estimatePeak(config, estimateModelState(config, plugins), limits.backend, limits.maxBufferBytes);
}

/**
 * The whole step must fit: the estimated peak (model states + activations + gathered units + the
 * allocator's overhead, memory-peak.ts) against `max_device_memory` and, where the device is host
 * memory (cpu, lavapipe), this rank's share of it. Checked before anything is allocated.
 * @throws MemoryBudgetError naming the estimate by part, the limit, and the changes that would fit
 *   (a smaller micro-batch, activation checkpointing, ZeRO-3, optimizer offload) with their estimates
 */
export function checkPeakFits(config: JobConfig, limits: MemoryLimits, mp: MemoryPlugins = { plugins: [] }): PeakEstimate {
  const est = estimateJobPeak(config, limits, mp);
  const budgets: { bytes: number; what: string; path: string }[] = [];
  if (config.max_device_memory !== null) budgets.push({ bytes: config.max_device_memory, what: `max_device_memory ${binBytes(config.max_device_memory)}`, path: "max_device_memory" });
  if (limits.host !== null) budgets.push({ bytes: limits.host.bytes / config.world_size, what: `the ${limits.backend} backend has ${gb(limits.host.bytes / config.world_size)} per rank (${gb(limits.host.bytes)} of host memory by ${limits.host.source}, ${config.world_size} rank${config.world_size === 1 ? "" : "s"})`, path: "train_micro_batch_size_per_gpu" });
  const over = budgets.find((b) => est.deviceBytes > b.bytes);
  if (over && over.path === "max_device_memory") over.what = `max_device_memory is ${binBytes(over.bytes)}`;
  if (!over) return est;
  const fixes: string[] = [];
  for (const r of peakRemedies(config)) {
    let e: PeakEstimate;
    try {
      e = estimateJobPeak(r.job, limits, mp);
    } catch {
      continue;
    }
    if (e.deviceBytes <= over.bytes) {
      fixes.push(`${r.what} (${binBytes(e.deviceBytes)})`);
      if (fixes.length >= 3) break;
    }
  }
  const act = est.peak.bytes - est.modelStates;
  throw new MemoryBudgetError(
    over.path,
    `the training step needs an estimated ${binBytes(est.deviceBytes)} per rank at its peak (${est.peak.name}): model states ${binBytes(est.modelStates)} + activations, gradients and gathered parameters ${binBytes(act)} + allocator overhead ${binBytes(est.allocatorOverhead)} (micro-batch ${config.train_micro_batch_size_per_gpu} × ${config.data.seq_len} tokens, activation checkpointing ${config.activation_checkpointing.enabled ? "on" : "off"}, ZeRO stage ${config.zero_optimization.stage}), but ${over.what}. ${fixes.length > 0 ? `Would fit: ${fixes.join("; or ")}.` : "No smaller micro-batch, checkpointing, ZeRO-3 or offload fits: use more ranks or a device with more memory."}`,
  );
}
