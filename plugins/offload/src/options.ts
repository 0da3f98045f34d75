/**
 * The offload keys of a job, checked and turned into what the plugin does (docs/offload.md has the
 * table). Every key acts, or is refused / warned about by name — none is silently ignored:
 *
 * | key | here |
 * | --- | --- |
 * | `offload_optimizer.device` | cpu: master/m/v in host memory; nvme: in files under nvme_path |
 * | `offload_optimizer.nvme_path` | the directory of those files (a per-run subdirectory) |
 * | `offload_optimizer.pin_memory` | true is warned about: Bun has no page-locked memory |
 * | `offload_optimizer.buffer_count` | nvme: host staging buffers (one state of one unit each; ≥ 3) |
 * | `offload_optimizer.fast_init` | nvme: initial m/v files sparse (ftruncate) instead of written |
 * | `offload_optimizer.ratio` | fraction of optimizer elements on the host (units in model order) |
 * | `offload_param.device` | stage 3: sharded parameters on the host or NVMe, copied to the device within the prefetch window (and, with the optimizer on the device, for its update) |
 * | `offload_param.nvme_path` | the directory of the shard files |
 * | `offload_param.pin_memory` | true is warned about: Bun has no page-locked memory |
 * | `offload_param.buffer_count` | nvme: at most this many shards cached in host memory |
 * | `offload_param.buffer_size` | nvme: largest shard in elements (larger is refused at set-up) |
 * | `offload_param.max_in_cpu` | nvme: at most this many parameter elements cached in host memory |
 * | `aio.*` | nvme optimizer-state I/O: request size/alignment, depth, streams, submission (aio.ts); warned about when not the default without offload_optimizer.device nvme |
 */
import { ConfigError, JOB_SPEC, type JobConfig } from "@zeromoe/core/config";

/** The environment variable that sets the host AdamW threads per rank (docs/offload.md). */
const OFFLOAD_THREADS_ENV = "ZEROMOE_OFFLOAD_THREADS";

/**
 * `ZEROMOE_OFFLOAD_THREADS` from `env`: a positive integer, or null when unset or empty.
 * @throws ConfigError naming the variable when it is set to anything else ("abc", "0", "1.5" were
 *   silently replaced by the default before)
 */
export function offloadThreadsFromEnv(env: Readonly<Record<string, string | undefined>> = process.env): number | null {
  const raw = env[OFFLOAD_THREADS_ENV];
  if (raw === undefined || raw.trim() === "") return null;
  const v = Number(raw);
  if (!Number.isSafeInteger(v) || v < 1) {
    throw new ConfigError([{ path: OFFLOAD_THREADS_ENV, message: `host AdamW threads per rank: expected a positive integer, got ${JSON.stringify(raw)}; unset it for the default max(1, floor(cores / world_size))`, source: "environment" }], "invalid environment");
  }
  return v;
}

/** The `aio` keys and their defaults, read from the job schema (core's AIO_SPEC) rather than copied. */
const AIO_DEFAULTS: Readonly<Record<string, unknown>> = (() => {
  const spec = JOB_SPEC.fields.aio;
  if (spec?.kind !== "object") throw new Error("offload: the job schema has no aio object");
  return Object.fromEntries(Object.entries(spec.fields).map(([k, f]) => [k, f.default]));
})();

/** Largest `aio.block_size` accepted with NVMe optimizer states (bytes; 1 GiB). */
const MAX_BLOCK_SIZE = 2 ** 30;

/** What the plugin does for a job. */
export interface OffloadOptions {
  optimizer: "none" | "cpu" | "nvme";
  nvmePath: string | null;
  bufferCount: number;
  fastInit: boolean;
  ratio: number;
  aio: JobConfig["aio"];
  /** Warnings to print once (rank 0). */
  warnings: string[];
  /** Parameter offload (stage 3): where sharded parameters live. */
  param: "none" | "cpu" | "nvme";
  paramNvmePath: string | null;
  /** nvme: host cache of at most this many shards … */
  paramBufferCount: number;
  /** … each at most this many elements (a larger shard is refused) … */
  paramBufferSize: number;
  /** … and at most this many elements in all. */
  maxInCpu: number;
}

/**
 * Check the offload keys of `config` and return the plugin's options.
 * @throws ConfigError naming the key and the fix for what cannot run
 */
export function offloadOptions(config: Readonly<JobConfig>): OffloadOptions {
  const z = config.zero_optimization;
  const oo = z.offload_optimizer;
  const op = z.offload_param;
  const issues: { path: string; message: string }[] = [];
  const warnings: string[] = [];
  if (op.device !== "none") {
    if (z.stage !== 3) issues.push({ path: "zero_optimization.offload_param.device", message: `parameter offload needs zero_optimization.stage 3, got stage ${z.stage}` });
    // without offload_optimizer (DeepSpeed allows it: offload_param is "valid only with stage 3"), the
    // device AdamW updates each offloaded shard on the device and writes it back (core optimizer.ts)
    if (config.optimizer.type === "Lamb") issues.push({ path: "zero_optimization.offload_param.device", message: `optimizer.type "Lamb" updates parameters on the device in place and does not support offloaded parameter shards: use AdamW/Adam, or offload_param.device "none"` });
    if (op.device === "nvme" && op.nvme_path === null) issues.push({ path: "zero_optimization.offload_param.nvme_path", message: `device "nvme" needs nvme_path (a directory), got null` });
    if (op.pin_memory) warnings.push("zero_optimization.offload_param.pin_memory: Bun has no page-locked (pinned) host memory; host shards are ordinary SharedArrayBuffers");
    if (op.device === "cpu") {
      for (const k of ["buffer_count", "buffer_size", "max_in_cpu"] as const) {
        const def = { buffer_count: 5, buffer_size: 1e8, max_in_cpu: 1e9 }[k];
        if (op[k] !== def) warnings.push(`zero_optimization.offload_param.${k} applies to device "nvme" only; no effect with "cpu"`);
      }
      if (op.nvme_path !== null) warnings.push(`zero_optimization.offload_param.nvme_path applies to device "nvme" only; no effect with "cpu"`);
    }
  }
  if (oo.device !== "none" && z.stage === 0) {
    issues.push({ path: "zero_optimization.offload_optimizer.device", message: "optimizer offload needs zero_optimization.stage 1, 2 or 3, got stage 0" });
  }
  if (oo.device === "nvme") {
    if (oo.nvme_path === null) issues.push({ path: "zero_optimization.offload_optimizer.nvme_path", message: `device "nvme" needs nvme_path (a directory), got null` });
    if (oo.buffer_count < 3) issues.push({ path: "zero_optimization.offload_optimizer.buffer_count", message: `nvme offload stages master, m and v of a unit at once: buffer_count must be at least 3 (6 double-buffers), got ${oo.buffer_count}` });
  }
  const a = config.aio;
  if (oo.device === "nvme" && a.block_size % 4096 !== 0) {
    issues.push({ path: "aio.block_size", message: `I/O requests are aligned to block_size: it must be a multiple of 4096 bytes, got ${a.block_size}` });
  }
  // each of a unit's three state regions is padded to a whole block in its file: a block of 2^44 B
  // made 48 TiB sparse files (EFBIG on ext4); DeepSpeed's default is 1 MiB
  if (oo.device === "nvme" && a.block_size > MAX_BLOCK_SIZE) {
    issues.push({ path: "aio.block_size", message: `each optimizer state region is padded to a whole block: block_size must be at most ${MAX_BLOCK_SIZE} bytes (1 GiB), got ${a.block_size}; DeepSpeed's default is 1048576` });
  }
  // aio shapes the NVMe optimizer-state files only (parameter files are read and written whole,
  // synchronously): a non-default aio key with nothing to act on is said, not silently ignored
  if (oo.device !== "nvme") {
    for (const [k, d] of Object.entries(AIO_DEFAULTS)) {
      const v = (a as unknown as Record<string, unknown>)[k];
      if (v !== d) warnings.push(`aio.${k} ${JSON.stringify(v)} applies to NVMe optimizer states only (zero_optimization.offload_optimizer.device "nvme"); no effect here`);
    }
  }
  if (oo.device !== "none" && oo.pin_memory) warnings.push("zero_optimization.offload_optimizer.pin_memory: Bun has no page-locked (pinned) host memory; host states are ordinary SharedArrayBuffers");
  if (oo.device === "cpu" && oo.fast_init) warnings.push(`zero_optimization.offload_optimizer.fast_init applies to device "nvme" only; no effect with "cpu"`);
  if (oo.device === "cpu" && oo.nvme_path !== null) warnings.push(`zero_optimization.offload_optimizer.nvme_path applies to device "nvme" only; no effect with "cpu"`);
  if (oo.device === "none" && oo.ratio !== 1) warnings.push(`zero_optimization.offload_optimizer.ratio ${oo.ratio} has no effect without an offload device`);
  if (op.device !== "none" && oo.device !== "none" && oo.ratio !== 1) issues.push({ path: "zero_optimization.offload_optimizer.ratio", message: `with offload_param every offloaded unit's optimizer must run on the host: ratio must be 1, got ${oo.ratio}` });
  if (issues.length > 0) throw new ConfigError(issues, "the offload settings cannot run");
  return {
    optimizer: oo.device, nvmePath: oo.nvme_path, bufferCount: oo.buffer_count, fastInit: oo.fast_init, ratio: oo.ratio, aio: a, warnings,
    param: op.device, paramNvmePath: op.nvme_path, paramBufferCount: op.buffer_count, paramBufferSize: op.buffer_size, maxInCpu: op.max_in_cpu,
  };
}
