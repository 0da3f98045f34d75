/**
 * Optimizer states of one unit in a file under `nvme_path` (ZeRO-Infinity's NVMe offload): master,
 * m and v as three regions of `length` f32 elements, each starting at a multiple of
 * `aio.block_size` so the bulk transfers of the step are large and aligned (aio.ts).
 *
 * The files are working state, like device memory: a crash mid-step loses the step, never a
 * checkpoint — checkpoints copy the states into their own record files (fsync'd, renamed into
 * place by core/src/checkpoint/save.ts). `write` (the checkpoint load's path) fdatasyncs before it
 * returns; the step's write-backs do not.
 *
 * {@link NvmeStaging} is the step's pipeline: `buffer_count` host buffers, each one state of one
 * unit, grouped in slots of three (master, m, v); with two slots or more, unit i+1's states are
 * read while unit i is updated (double buffering), and unit i's write-back overlaps the next read.
 */
import { closeSync, fdatasync, ftruncateSync, mkdirSync, mkdtempSync, openSync, rmSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { ConfigError } from "@zeromoe/core/config";
import type { HostOptimizerState, OptimizerStateName, UnitHandle } from "@zeromoe/core/plugin";
import type { Aio } from "./aio.ts";
import { check } from "./cpu-state.ts";
import type { HostLedger } from "./host-ledger.ts";
import type { StagedStates, StateViews } from "./offload-step.ts";

const fdatasyncP = promisify(fdatasync);
const STATES: readonly OptimizerStateName[] = ["master", "m", "v"];

/**
 * A per-run directory under `nvmePath` for rank `rank`'s files (`nvmePath` is created when missing).
 * @param key the config key that gave `nvmePath` (named in the error)
 * @throws ConfigError naming `key` when the directory cannot be created (a regular file in the way,
 *   no permission, read-only file system, …), with the file system's reason
 */
export function createRunDir(nvmePath: string, rank: number, key: string): string {
  try {
    mkdirSync(nvmePath, { recursive: true });
    return mkdtempSync(join(nvmePath, `zeromoe-offload-r${rank}-`));
  } catch (e) {
    throw new ConfigError([{ path: key, message: `cannot create the offload directory under ${JSON.stringify(nvmePath)} (${(e as Error).message}): set it to a writable directory` }], "the offload settings cannot run");
  }
}

/** NVMe-resident optimizer states of one unit (see the module comment). */
export class NvmeOptimizerState implements HostOptimizerState {
  readonly device = "nvme" as const;
  readonly length: number;
  readonly path: string;
  readonly fd: number;
  /** Bytes per state region (length × 4 rounded up to block_size). */
  readonly region: number;
  private readonly aio: Aio;
  private readonly ledger: HostLedger;
  private freed = false;

  /**
   * Create the file (sparse: ftruncate) and, unless `fastInit`, write zeros over the m and v regions
   * (the master is written by the engine's initMaster right after).
   * @throws on a file-system error (the message names the path)
   */
  constructor(path: string, length: number, aio: Aio, ledger: HostLedger, fastInit: boolean) {
    this.length = length;
    this.path = path;
    this.aio = aio;
    this.ledger = ledger;
    const bs = aio.settings.block_size;
    this.region = Math.ceil((length * 4) / bs) * bs;
    try {
      this.fd = openSync(path, "w+");
      ftruncateSync(this.fd, 3 * this.region);
    } catch (e) {
      // a file-system refusal (no space, file too large, …) is the nvme_path's problem: exit 2 naming it
      throw new ConfigError([{ path: "zero_optimization.offload_optimizer.nvme_path", message: `cannot create ${path} (${3 * this.region} bytes: 3 state regions of ${this.region}): ${(e as Error).message}; choose a directory on a drive with room for the states, or a smaller aio.block_size` }], "the offload settings cannot run");
    }
    ledger.addNvme("optim", 3 * this.region);
    this.zeroed = fastInit ? Promise.resolve() : this.writeZeros();
  }

  /** Resolves when the initial zeros are written (not fast_init). */
  readonly zeroed: Promise<void>;

  private async writeZeros(): Promise<void> {
    const z = new Uint8Array(Math.min(this.region, 1 << 22));
    for (const s of [1, 2]) {
      for (let o = 0; o < this.length * 4; o += z.byteLength) {
        const n = Math.min(z.byteLength, this.length * 4 - o);
        await this.aio.write(this.fd, z.subarray(0, n), s * this.region + o, this.path);
        this.ledger.moved.nvme_write += n;
      }
    }
  }

  /** Byte offset of element `off` of `state` in the file. */
  offsetOf(state: OptimizerStateName, off: number): number {
    return STATES.indexOf(state) * this.region + off * 4;
  }

  async read(state: OptimizerStateName, off: number, n: number): Promise<Float32Array> {
    check(this, state, off, n);
    await this.zeroed;
    const out = new Float32Array(n);
    await this.aio.read(this.fd, new Uint8Array(out.buffer), this.offsetOf(state, off), this.path);
    this.ledger.moved.nvme_read += n * 4;
    return out;
  }

  async write(state: OptimizerStateName, off: number, data: Float32Array): Promise<void> {
    check(this, state, off, data.length);
    await this.zeroed;
    await this.aio.write(this.fd, new Uint8Array(data.buffer, data.byteOffset, data.byteLength), this.offsetOf(state, off), this.path);
    await fdatasyncP(this.fd);
    this.ledger.moved.nvme_write += data.byteLength;
  }

  /** Read all three states into `views` (whole regions, aligned). */
  async readAll(views: StateViews): Promise<void> {
    await this.zeroed;
    await Promise.all(STATES.map((s) => this.aio.read(this.fd, bytesOf(views[s], this.length), this.offsetOf(s, 0), this.path)));
    this.ledger.moved.nvme_read += 12 * this.length;
  }

  /** Write all three states from `views` (no fsync: working state). */
  async writeAll(views: StateViews): Promise<void> {
    await Promise.all(STATES.map((s) => this.aio.write(this.fd, bytesOf(views[s], this.length), this.offsetOf(s, 0), this.path)));
    this.ledger.moved.nvme_write += 12 * this.length;
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    try {
      closeSync(this.fd);
      unlinkSync(this.path);
    } catch {
      // already gone: nothing to release
    }
    this.ledger.addNvme("optim", -3 * this.region);
  }
}

function bytesOf(a: Float32Array, n: number): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, n * 4);
}

/**
 * Staging slots of a step over NVMe states: `buffer_count / 3` (master, m and v of a unit per slot),
 * at least 1, and never more than `units`, the units with NVMe states (a step never holds more, so
 * more are not allocated whatever `bufferCount` asks: 1e9 would exhaust host memory).
 */
export function stagingSlots(bufferCount: number, units: number = Number.POSITIVE_INFINITY): number {
  return Math.max(1, Math.min(Math.floor(bufferCount / 3), units));
}

/** The step's staging slots over NVMe states (see the module comment). */
export class NvmeStaging implements StagedStates {
  readonly depth: number;
  private free: StateViews[] = [];
  private waiters: ((v: StateViews) => void)[] = [];
  private slots: { sab: SharedArrayBuffer; views: StateViews }[] = [];

  /**
   * @param bufferCount `offload_optimizer.buffer_count` (≥ 3); @param maxLength largest unit state
   * @param units how many units have NVMe states ({@link stagingSlots} allocates no more slots)
   */
  constructor(bufferCount: number, maxLength: number, private readonly ledger: HostLedger, units: number = Number.POSITIVE_INFINITY) {
    this.depth = stagingSlots(bufferCount, units);
    for (let i = 0; i < this.depth; i++) {
      const len = Math.max(1, maxLength);
      const sab = new SharedArrayBuffer(12 * len);
      const views = { master: new Float32Array(sab, 0, len), m: new Float32Array(sab, 4 * len, len), v: new Float32Array(sab, 8 * len, len) };
      this.slots.push({ sab, views });
      this.free.push(views);
      ledger.addHost("optim", 12 * len);
    }
  }

  private take(): Promise<StateViews> {
    const v = this.free.pop();
    if (v) return Promise.resolve(v);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private give(v: StateViews): void {
    const w = this.waiters.shift();
    if (w) w(v);
    else this.free.push(v);
  }

  async acquire(u: UnitHandle): Promise<StateViews> {
    const h = u.hostOptimizerState();
    if (!(h instanceof NvmeOptimizerState)) throw new Error(`offload: unit ${u.name} has no NVMe optimizer states`);
    const slot = await this.take();
    await h.readAll(slot);
    return slot;
  }

  async release(u: UnitHandle, views: StateViews): Promise<void> {
    const h = u.hostOptimizerState() as NvmeOptimizerState;
    try {
      await h.writeAll(views);
    } finally {
      this.give(views);
    }
  }

  /** Release the host buffers. */
  dispose(): void {
    for (const s of this.slots) this.ledger.addHost("optim", -s.sab.byteLength);
    this.slots = [];
    this.free = [];
  }
}

/** Remove a run directory (after its files were freed). */
export function removeRunDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
