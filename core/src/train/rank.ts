/**
 * Entry module of one training rank, started by `launch` (core/src/launch/) for every rank,
 * world size 1 included: create the backend, the rank's DataLoader and the Engine, initialise from
 * safetensors (`--init-from`) or resume from a checkpoint (`--resume`), run the loop (loop.ts), and
 * return a {@link RankReport} for the summary.
 *
 * Output: only rank 0 writes, with synchronous writes to file descriptor 1. In a Bun 1.4.5 Worker
 * both `console.log` and `process.stdout.write` to a file are buffered and flushed only when the
 * worker's event loop turns, which a CPU-bound training loop rarely lets it do: lines were lost
 * when the launcher ended the worker (seen 2026-11-29 with `bun run train > log`). A progress bar
 * is drawn when the launcher says stdout is a terminal.
 */
import { writeSync } from "node:fs";
import type { MemTag } from "@zeromoe/kernels";
import { join } from "node:path";
import { CheckpointError } from "../checkpoint/errors.ts";
import { checkHubShapes, initFromHub } from "../checkpoint/hub-dir.ts";
import { createModel } from "../engine/model-factory.ts";
import { Progress } from "../cli/progress.ts";
import type { Communicator } from "../comm/communicator.ts";
import type { JobConfig } from "../config/types.ts";
import { DataLoader } from "../data/loader.ts";
import { readCheckpointManifest } from "../checkpoint/load.ts";
import { Engine } from "../engine/engine.ts";
import { resetKernelProfile, writeKernelProfile } from "./kernel-profile.ts";
import { destroyBackend, kernelProfileRequest, probeShapeOf, selectTrainBackend, tensorCoresRequest } from "./backend.ts";
import { mpiEnvironment } from "../comm/mpi/environment.ts";
import { mib } from "./log.ts";
import { withDeviceBudget } from "./device-budget.ts";
import { backendMemoryLimits, checkModelStateFits, checkPeakFits, readHostAvailableMemory, type HostMemory } from "./memory-check.ts";
import { trainLoop, type LoopOutput } from "./loop.ts";
import { loadJobPlugins } from "./job-plugins.ts";
import { dataStreamChanges, scheduleChanges } from "./resume-config.ts";
import type { RankComm, RankMemory, RankReport } from "./summary.ts";
import { RunObserver } from "../observe/observer.ts";
import { saveFp32Weights } from "../checkpoint/fp32-weights.ts";
import { BatchDumper } from "./batch-dump.ts";
import { StartupPhases } from "./startup-phases.ts";
import { sleepSync } from "@zeromoe/kernels/runtime";

/** Arguments every rank receives (structured-cloned by launch). */
export interface TrainRankArgs {
  /** The resolved job (config.world_size equals the launched world size). */
  config: JobConfig;
  /** Rank 0 writes log lines to stdout. False: no output at all (benchmarks, tests). */
  verbose: boolean;
  /** Draw a progress bar (stdout is a terminal). */
  tty: boolean;
  /** Terminal width for the bar. */
  columns?: number;
  /** Folder that relative plugin paths are resolved against (the job file's working directory). */
  baseDir: string;
  /** Resume from this checkpoint: a root (its `latest` tag) or a tag directory (`--resume`). */
  resume?: string;
  /** Initialise the parameters from this Hugging Face safetensors file (`--init-from`). */
  initFrom?: string;
  /** Write every step's batches into this folder (batch-dump.ts). */
  dumpBatches?: string;
  /** Write the fp32 weights before step 1 into this folder (checkpoint/fp32-weights.ts). */
  saveInit?: string;
  /** Stop flag shared with the launcher's SIGINT/SIGTERM handlers (stop-signal.ts). */
  stop?: Int32Array;
  /** Host memory available before the ranks started (memory-check.ts; default: read now). */
  hostMemory?: HostMemory;
  /** Epoch ms of the launching process's start, for the `startup` line (startup-phases.ts);
   * default: this thread's start. */
  processStartMs?: number;
}

/** This rank's index among the job's ranks on this host (picks its GPU): the rank itself on the
 * `local` transport (one host), Open MPI's OMPI_COMM_WORLD_LOCAL_RANK on the `mpi` transport. */
function localRankOf(comm: Communicator): number {
  return comm.transport === "mpi" ? (mpiEnvironment()?.localRank ?? 0) : comm.rank;
}

const SILENT: LoopOutput = { line: () => {}, progress: () => {} };

/** Write all of `s` to stdout now (retrying while a non-blocking pipe is full). */
function writeStdout(s: string): void {
  let buf = Buffer.from(s);
  for (let tries = 0; buf.length > 0; ) {
    try {
      buf = buf.subarray(writeSync(1, buf));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EAGAIN" || ++tries > 1000) throw e;
      sleepSync(1);
    }
  }
}

function rank0Output(args: TrainRankArgs): { out: LoopOutput; done: () => void } {
  const write = writeStdout;
  if (!args.tty) return { out: { line: (m) => write(m + "\n"), progress: () => {} }, done: () => {} };
  const bar = new Progress({ total: args.config.steps, label: "train", tty: true, sink: { write, isTTY: true, columns: args.columns } });
  return { out: { line: (m) => bar.log(m), progress: (s, f) => bar.update(s, f) }, done: () => bar.done() };
}

/**
 * Train this rank. Every rank must be launched with the same `args`.
 * @throws MemoryBudgetError (the model states cannot fit the backend), DataError (dataset missing
 * or too small), CheckpointError (`resume`), SafetensorsError
 * (`initFrom`), Error from the backend ("webgpu" requested but unusable) or the engine; launch
 * turns it into a failure of the whole job.
 */
export async function trainRank(comm: Communicator, args: TrainRankArgs): Promise<RankReport> {
  const config = args.config;
  if (config.world_size !== comm.worldSize) throw new Error(`train: config.world_size is ${config.world_size} but ${comm.worldSize} ranks were launched`);
  const talk = comm.rank === 0 && args.verbose;
  const startup = new StartupPhases(comm.transport === "mpi" ? undefined : args.processStartMs);
  const { out, done } = talk ? rank0Output(args) : { out: SILENT, done: () => {} };
  // bf16/fp16 jobs may run matmuls on tensor cores (operands power-of-two scaled into f16's range)
  const tc = tensorCoresRequest({ fp16: config.fp16.enabled, bf16: config.bf16.enabled });
  const { backend: rawBe, reason } = await selectTrainBackend(config.backend, localRankOf(comm), probeShapeOf(config.model, config.train_micro_batch_size_per_gpu * config.data.seq_len), tc);
  // max_device_memory: the backend's allocator refuses to go past the budget (device-budget.ts)
  const be = withDeviceBudget(rawBe, config.max_device_memory);
  startup.mark("backend");
  // the engine's states (e.g. offloaded NVMe state files) are released however the rank ends
  let live: { destroy(): void } | null = null;
  try {
    out.line(`backend    ${be.info.name} on "${be.info.adapter}" (${reason})`);
    // before anything is allocated: can this backend hold the model states at all?
    // the job's plugins first: their memory contributions shape the estimate, and a plugin set
    // that does not compose is a config error before any data is loaded
    const jobPlugins = await loadJobPlugins(config, args.baseDir);
    const limits = backendMemoryLimits(be, args.hostMemory ?? readHostAvailableMemory());
    checkModelStateFits(config, limits, jobPlugins.memory);
    // and the whole step: model states + activations + gathered units (memory-peak.ts)
    const peak = checkPeakFits(config, limits, jobPlugins.memory);
    out.line(`memory     estimated peak ${mib(peak.deviceBytes)} MiB per rank (${peak.peak.name}; model states ${mib(peak.modelStates)} MiB)`);
    // Hugging Face weights: --init-from, or the job's model.from_pretrained (not when resuming);
    // their headers are matched against the model's parameter shapes before anything is built (a
    // config.json claiming a larger model than its weights allocated 2.2 GB before refusing)
    const initFrom = args.initFrom ?? (args.resume === undefined ? config.model.from_pretrained : undefined);
    if (initFrom !== undefined) {
      const shapes = createModel(be, config.model, { allocate: false });
      try {
        checkHubShapes(initFrom, shapes.parameters().map((p) => ({ name: p.name, shape: p.shape })), config.model.tie_word_embeddings, [...shapes.buffers().keys()]);
      } finally {
        shapes.destroy();
      }
    }
    startup.mark("plugins + memory check");
    const loader = await DataLoader.fromConfig(config.data, {
      micro: config.train_micro_batch_size_per_gpu,
      accum: config.gradient_accumulation_steps,
      worldSize: comm.worldSize,
      rank: comm.rank,
      seed: config.seed,
      modelVocabSize: config.model.vocab_size,
      log: talk ? (m) => out.line(m) : () => {},
    });
    const d = loader.info;
    startup.mark("data");
    out.line(`data       ${d.dataset}: ${d.totalTokens} tokens (${d.trainTokens} train, ${d.validationTokens} validation), ${d.trainWindows} training windows, ${d.batchesPerEpoch} steps per epoch`);
    // resuming: the plugins' manifest entries (e.g. expert placement) come back before partitioning
    const restore = args.resume !== undefined ? readCheckpointManifest(args.resume, config.checkpoint.dir).manifest.plugins : null;
    // timing, comms logger, FLOPs profiler, monitors, history (core/src/observe/): the engine and the
    // loop use the observed communicator and backend
    const observer = RunObserver.create({ config, comm, be, line: talk ? (m) => out.line(m) : () => {} });
    const engine = await Engine.create({
      config, comm: observer.comm, backend: observer.be, plugins: jobPlugins.plugins, restore, log: talk ? (m) => out.line(m) : () => {},
      startupPhase: async (name) => {
        await be.flush();
        startup.mark(name);
      },
    });
    live = engine;
    observer.attach(engine);
    engine.model.gradientCheckpointing = config.activation_checkpointing.enabled;
    if (initFrom !== undefined) {
      const t0 = performance.now();
      const r = await initFromHub(engine, initFrom);
      out.line(`init-from  ${initFrom}: ${r.elements} parameter elements read by rank ${comm.rank} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      if (r.warning) out.line(`warning: ${r.warning}`);
    }
    let startStep = 0;
    if (args.resume !== undefined) {
      const r = await engine.loadCheckpoint(args.resume);
      if (r.dataPosition) {
        try {
          loader.loadState(r.dataPosition);
        } catch (e) {
          // a saved position outside this dataset: a checkpoint problem, named (issue 18)
          throw new CheckpointError(join(r.tagDir, "manifest.json"), `field data_position: ${(e as Error).message.replace(/^\w+\.loadState: /, "")}`);
        }
      }
      startStep = engine.globalSteps;
      const m = r.manifest;
      const reshard = r.resharded ? `, resharded from world size ${m.world_size} (ep_size ${m.ep_size})` : "";
      out.line(`resume     ${r.tagDir}: after step ${startStep}${reshard}; ${mib(r.bytesRead)} MiB read by rank ${comm.rank} in ${r.seconds.toFixed(1)} s`);
      const changed = dataStreamChanges(m.config, config);
      if (changed.length > 0) out.line(`warning: resuming with another data stream than the checkpoint's: ${changed.join(", ")}; the saved data position counts windows of the checkpoint's stream, so training continues at that position in a different one`);
      if (startStep >= config.steps) out.line(`warning: the checkpoint is at step ${startStep}, steps is ${config.steps}: nothing to train`);
      const schedule = scheduleChanges(m.config, config);
      if (schedule.length > 0) out.line(`warning: resuming with another learning-rate schedule than the checkpoint's: ${schedule.join(", ")}; the scheduler continues from step ${startStep} of the new plan, so the lr does not follow the saved run's (keep steps and the scheduler section to resume it exactly)`);
      if (config.checkpoint.dir === null) out.line(`warning: checkpoint.dir is null: this resumed run saves no checkpoint (it resumed from ${r.tagDir}); set checkpoint.dir to keep saving`);
    }
    if (args.saveInit !== undefined) {
      const t0 = performance.now();
      const path = await saveFp32Weights(engine, args.saveInit);
      out.line(`save-init  ${path}: fp32 weights of step ${startStep} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    }
    const dump = args.dumpBatches === undefined ? null : new BatchDumper(args.dumpBatches, config, comm.rank, startStep);
    if (dump) out.line(`dump       every step's batches into ${dump.dir}`);
    await be.flush();
    startup.mark(initFrom !== undefined || args.resume !== undefined ? "weights loaded" : "before the loop");
    startup.beforeFirstStep(rawBe);
    const profilePath = comm.rank === 0 ? kernelProfileRequest() : undefined;
    let profiling = false;
    const onFirstStep = async () => {
      startup.mark("first step");
      out.line(startup.line(rawBe));
      // the kernel profile covers the steps after the first (compilation and first touches left out)
      if (profilePath !== undefined) {
        await resetKernelProfile(rawBe);
        profiling = true;
      }
    };
    const loop = await trainLoop({ config, comm: observer.comm, backend: observer.be, engine, loader, out, startStep, checkpointDir: config.checkpoint.dir, stop: args.stop, observer, dump, onFirstStep });
    done();
    observer.finish();
    if (profilePath !== undefined && profiling) {
      const steps = loop.losses.length - 1;
      const prof = await writeKernelProfile(rawBe, profilePath, steps);
      if (prof) out.line(`profile    ${profilePath}: ${prof.gpu_ms_per_step.toFixed(1)} GPU ms per step over ${steps} steps, ${prof.dispatches_per_step} dispatches; top: ${prof.kernels.slice(0, 5).map((k) => `${k.label} ${k.ms_per_step.toFixed(1)} ms`).join(", ")}`);
    }

    // Figures of the run (all collectives are done).
    const mem = be.memory();
    const cur = mem.current as Record<MemTag, number>;
    const memory: RankMemory = {
      rank: comm.rank,
      params: cur.param,
      grads: cur.grad,
      optim: cur.optim,
      gathered: cur.gathered,
      activation: cur.activation,
      comm: cur.comm,
      other: cur.other,
      padding: engine.paddingBytes(),
      peak_total: mem.peakTotal,
      peak_by_tag: { ...mem.peak },
    };
    const st = comm.stats();
    const commBytes: RankComm = {
      rank: comm.rank,
      all_gather: st.all_gather.bytesSent,
      reduce_scatter: st.reduce_scatter.bytesSent,
      all_reduce: st.all_reduce.bytesSent,
      all_to_all: st.all_to_all_v.bytesSent,
      broadcast: st.broadcast.bytesSent,
    };
    const report: RankReport = {
      rank: comm.rank,
      backend: { name: be.info.name, adapter: be.info.adapter, reason },
      numParameters: engine.model.numParameters,
      startStep,
      checkpoints: loop.checkpoints,
      stopSignal: loop.stopSignal,
      losses: loop.losses,
      stepSeconds: loop.stepSeconds,
      valLoss: loop.valLoss,
      tokensPerStep: config.train_batch_size * config.data.seq_len,
      memory,
      comm: commBytes,
      sections: engine.summarySections(),
      observe: observer.report(),
    };
    live = null;
    engine.destroy();
    return report;
  } finally {
    if (live !== null) {
      try {
        live.destroy();
      } catch {
        // the rank is failing already: its own error is the one to report
      }
    }
    destroyBackend(be);
  }
}

/** launch's entry signature: `(comm, rank, worldSize, args)`. */
export default function main(comm: Communicator, _rank: number, _worldSize: number, args: TrainRankArgs): Promise<RankReport> {
  return trainRank(comm, args);
}
