/**
 * ZeRO-Offload and ZeRO-Infinity for ZeroMoE (Ren et al., "ZeRO-Offload", USENIX ATC'21;
 * Rajbhandari et al., "ZeRO-Infinity", SC'21): each rank's optimizer states — fp32 master, m, v of
 * its optimizer range — live in host memory (`offload_optimizer.device: "cpu"`) or in files under
 * `nvme_path` (`"nvme"`) instead of on the device. Selected by the registry when a device is not
 * "none"; works on top of ZeRO stages 1–3 (their partitioning decides the range; this plugin only
 * moves where it lives).
 *
 * Per step: each offloaded unit's reduced gradient is copied device → host as soon as its reduction
 * completes in backward (the offload hook's `gradReduced`, grad-copy.ts); after the global gradient
 * norm and clipping the engine calls the hook's `step`: AdamW runs on the host over worker
 * threads on shared memory (adamw-pool.ts; the arithmetic of the cpu backend's fused kernel, so
 * bit-identical on the cpu backend), and the updated parameters go back to the device (16-bit with
 * mixed precision). The device keeps no `optim` buffer for an offloaded unit.
 *
 * Keys: options.ts (every key acts or is refused/warned by name). Docs: docs/offload.md.
 */
import { availableParallelism } from "node:os";
import { ConfigError } from "@zeromoe/core/config";
import { definePlugin, type EngineHooks, type HookContext, type HostOptimizerState, type HostParamShard, type SetupContext, type UnitHandle } from "@zeromoe/core/plugin";
import { offloadGatherWindow } from "./gather-window.ts";
import { CpuParamShard, NvmeParamShard, ParamCache, type ParamDtype } from "./param-state.ts";
import { join } from "node:path";
import { HostAdamWPool } from "./adamw-pool.ts";
import { Aio } from "./aio.ts";
import { createRunDir, NvmeOptimizerState, NvmeStaging, removeRunDir, stagingSlots } from "./nvme-state.ts";
import { CpuOptimizerState } from "./cpu-state.ts";
import { GradCopies } from "./grad-copy.ts";
import { HostLedger } from "./host-ledger.ts";
import { offloadMemory } from "./memory.ts";
import { cpuStates, GradStaging, offloadStep, type StagedStates } from "./offload-step.ts";
import { offloadOptions, offloadThreadsFromEnv } from "./options.ts";

type Hooks = EngineHooks & Record<string, unknown>;

export { adamwHost, type GradDtype } from "./host-adamw.ts";
export { HostAdamWPool, type AdamWPoolOptions } from "./adamw-pool.ts";
export { CpuOptimizerState } from "./cpu-state.ts";
export { Aio, type AioSettings, type AioStats } from "./aio.ts";
export { NvmeOptimizerState, NvmeStaging } from "./nvme-state.ts";
export { CpuParamShard, NvmeParamShard, ParamCache } from "./param-state.ts";
export { offloadGatherWindow } from "./gather-window.ts";
export { HostLedger } from "./host-ledger.ts";
export { GradCopies } from "./grad-copy.ts";
export { offloadMemory } from "./memory.ts";
export { offloadOptions, type OffloadOptions } from "./options.ts";

/** Options of {@link createOffloadPlugin} (not config keys: how this process runs the host AdamW). */
export interface OffloadPluginOptions {
  /** Host AdamW threads per rank, the calling thread included. Default: the environment variable
   * ZEROMOE_OFFLOAD_THREADS, else max(1, floor(availableParallelism() / world_size)) — the ranks
   * of the local transport share this process's cores. */
  threads?: number;
  /** Fewest elements per thread (smaller updates run on the rank's own thread). Default 16384. */
  minPerThread?: number;
  /** With `offload_param`: skip fetching (host → device and all_gather) an f32 expert that no rank
   * of its edp group routed tokens to in the micro-batch (gather-window.ts). Default true. */
  skipIdleExperts?: boolean;
  /** Copy each offloaded unit's gradient device → host as its reduction completes during backward
   * (the offload hook's `gradReduced`; grad-copy.ts), into a host buffer per unit. false: copy at the
   * optimizer step through two staging slots (the comparison run). Default true. */
  overlapGradCopy?: boolean;
}

/** Default host AdamW threads (see {@link OffloadPluginOptions.threads}).
 * @throws ConfigError when ZEROMOE_OFFLOAD_THREADS is set but not a positive integer */
export function defaultThreads(worldSize: number): number {
  const env = offloadThreadsFromEnv();
  if (env !== null) return env;
  return Math.max(1, Math.floor(availableParallelism() / Math.max(1, worldSize)));
}

/** Build the offload plugin (the default export uses default options). */
export function createOffloadPlugin(popts: OffloadPluginOptions = {}) {
  return definePlugin<Hooks, SetupContext>({
    name: "offload",
    configKey: "zero_optimization.offload_optimizer",
    claims: ["offload"],
    memory: offloadMemory,
    setup(ctx) {
      const o = offloadOptions(ctx.config);
      if (ctx.rank === 0) for (const w of o.warnings) ctx.warn(w);
      const ledger = new HostLedger();
      const pool = new HostAdamWPool({ threads: popts.threads ?? defaultThreads(ctx.worldSize), minPerThread: popts.minPerThread });
      const staging = new GradStaging(ledger);
      const overlapGrad = popts.overlapGradCopy ?? true;
      const grads = new GradCopies(ledger);
      // ratio: units in model order go to the host until `ratio` of the optimizer's elements are there
      const total = ctx.modelUnits.reduce((s, u) => s + u.numel, 0);
      const placed = new Map<string, "cpu" | "nvme" | "device">();
      let acc = 0;
      for (const u of ctx.modelUnits) {
        const on = o.optimizer !== "none" && (o.ratio >= 1 || acc + u.numel <= o.ratio * total);
        placed.set(u.name, on ? o.optimizer as "cpu" | "nvme" : "device");
        if (on) acc += u.numel;
      }
      // a ratio so small that no unit fits offloads nothing: said once, not hidden behind "offload optimizer→cpu"
      if (o.optimizer !== "none" && acc === 0 && ctx.rank === 0) {
        ctx.warn(`zero_optimization.offload_optimizer.ratio ${o.ratio}: no unit's optimizer states were offloaded (units go to the host in model order while their elements stay within ratio × ${total}; the first has ${ctx.modelUnits[0]?.numel ?? 0}); raise ratio to offload`);
      }
      let live = 0;
      const aio = new Aio(o.aio);
      let runDir: string | null = null;
      let nvmeStaging: NvmeStaging | null = null;
      let maxNvmeLength = 0;
      let nvmeUnits = 0;
      let stagingLogged = false;
      const nvmeStates = (): StagedStates => {
        if (!nvmeStaging) {
          nvmeStaging = new NvmeStaging(o.bufferCount, maxNvmeLength, ledger, nvmeUnits);
          // said where the slots are allocated (first step), from the staging's own depth: only
          // then is it known how many units this rank holds on NVMe (expert parallelism: its own
          // experts; frozen units: no states; ratio: units in model order)
          if (!stagingLogged) {
            stagingLogged = true;
            const d = nvmeStaging.depth;
            ctx.log(`offload    nvme staging on rank ${ctx.rank}: ${d} staging slot${d >= 2 ? "s" : ""} of 3 × ${Math.max(1, maxNvmeLength)} f32 for ${nvmeUnits} unit${nvmeUnits === 1 ? "" : "s"} on NVMe${d >= 2 ? ": double-buffered" : o.bufferCount >= 6 ? ": one unit on NVMe" : ": buffer_count ≥ 6 double-buffers"}`);
          }
        }
        return nvmeStaging;
      };
      const provider = new Map<UnitHandle, () => StagedStates>();
      const paramCache = new ParamCache(o.maxInCpu, o.paramBufferCount, ledger);
      let paramDir: string | null = null;
      const release = () => {
        if (--live > 0) return;
        pool.close();
        staging.free();
        grads.free();
        nvmeStaging?.dispose();
        nvmeStaging = null;
        if (runDir) removeRunDir(runDir);
        runDir = null;
        if (paramDir) removeRunDir(paramDir);
        paramDir = null;
      };
      let paramShards = 0;
      let warnedNoParams = false;
      ctx.claim("offload", {
        optimizerDevice: (unit) => placed.get(unit.name) ?? "device",
        // ZeRO-Offload's copy-out overlapped with backward: start the offloaded gradient's copy now
        ...(overlapGrad ? { gradReduced: (unit: UnitHandle, hc: HookContext) => {
          if (unit.optimizerDevice !== "device" && unit.optimCount > 0) grads.start(hc.be, unit);
        } } : {}),
        createHostState: (unit): HostOptimizerState => {
          const len = unit.plan.optim === "sharded" ? unit.plan.shardSize : Math.max(1, unit.numel);
          let st: CpuOptimizerState | NvmeOptimizerState;
          if (unit.optimizerDevice === "nvme") {
            runDir ??= createRunDir(o.nvmePath!, ctx.rank, "zero_optimization.offload_optimizer.nvme_path");
            st = new NvmeOptimizerState(join(runDir, `${unit.name}.optim`), len, aio, ledger, o.fastInit);
            maxNvmeLength = Math.max(maxNvmeLength, len);
            nvmeUnits++;
            provider.set(unit, nvmeStates);
          } else {
            st = new CpuOptimizerState(len, ledger);
            provider.set(unit, () => cpuStates);
          }
          live++;
          const free = st.free.bind(st);
          st.free = () => {
            free();
            release();
          };
          return st;
        },
        paramDevice: () => (o.param === "none" ? "device" : o.param),
        createHostParams: (unit): HostParamShard => {
          paramShards++;
          const len = unit.plan.shardSize;
          const dtype = unit.dtype as ParamDtype;
          let sh: CpuParamShard | NvmeParamShard;
          if (o.param === "nvme") {
            if (len > o.paramBufferSize) {
              throw new ConfigError([{ path: "zero_optimization.offload_param.buffer_size", message: `unit ${unit.name}'s parameter shard has ${len} elements, more than buffer_size ${o.paramBufferSize}: raise buffer_size to at least ${len}` }], "the offload settings cannot run");
            }
            paramDir ??= createRunDir(o.paramNvmePath!, ctx.rank, "zero_optimization.offload_param.nvme_path");
            sh = new NvmeParamShard(join(paramDir, `${unit.name}.param`), len, dtype, paramCache, ledger);
          } else sh = new CpuParamShard(len, dtype, ledger);
          live++;
          const free = sh.free.bind(sh);
          sh.free = () => {
            free();
            release();
          };
          return sh;
        },
        step: (units, hp, hc) => {
          return offloadStep(units, hp, hc, { pool, staging, ledger, grads, states: (u) => (provider.get(u) ?? (() => cpuStates))() });
        },
      });
      if (o.param !== "none") {
        ctx.wrap("gather", (prev) => {
          const w = offloadGatherWindow(prev, ledger, { skipIdleExperts: popts.skipIdleExperts });
          return {
            ...w,
            async endStep(hc) {
              // offload_param acts only on sharded parameters: when ZeRO-3 keeps every unit whole (each
              // below stage3_param_persistence_threshold) nothing moves, which is said once, not hidden
              if (paramShards === 0 && !warnedNoParams) {
                warnedNoParams = true;
                if (ctx.rank === 0) ctx.warn(`zero_optimization.offload_param: no parameters were offloaded: every unit has fewer than stage3_param_persistence_threshold (${ctx.config.zero_optimization.stage3_param_persistence_threshold}) elements, so ZeRO-3 keeps it whole on every rank; lower the threshold to offload them`);
              }
              await w.endStep!(hc);
            },
          };
        });
      }
      // at set-up only buffer_count's bound is known: which units this rank holds on NVMe is decided
      // when the units are partitioned (after every setup: expert placement, freeze), so the slots
      // really allocated are logged by nvmeStates() when it allocates them
      const most = stagingSlots(o.bufferCount);
      if (o.optimizer === "nvme") ctx.log(`offload    optimizer states → nvme under ${o.nvmePath} (buffer_count ${o.bufferCount}: at most ${most} slot${most === 1 ? "" : "s"} of master, m and v, no more than this rank's units on NVMe; aio block ${o.aio.block_size} B, queue ${o.aio.queue_depth}, ${o.aio.thread_count} stream${o.aio.thread_count === 1 ? "" : "s"})`);
      ctx.metrics.summary("offload", () => ({
        optimizer_device: o.optimizer,
        param_device: o.param,
        ratio: o.ratio,
        threads: pool.threads,
        grad_copy: overlapGrad ? "overlapped with backward" : "at the optimizer step",
        units_offloaded: [...placed.values()].filter((d) => d !== "device").length,
        ...ledger.snapshot(),
        skip_idle_experts: o.param !== "none" && (popts.skipIdleExperts ?? true),
        param_h2d_bytes_per_step: ledger.paramSteps > 0 ? ledger.moved.param_h2d / ledger.paramSteps : 0,
        param_h2d_skipped_bytes_per_step: ledger.paramSteps > 0 ? ledger.moved.param_h2d_skipped / ledger.paramSteps : 0,
        aio: { ...aio.stats },
      }));
    },
  });
}

/** The offload plugin (selected by `zero_optimization.offload_optimizer.device` cpu/nvme). */
export const offload = createOffloadPlugin();
export default offload;
