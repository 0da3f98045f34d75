/**
 * Parameter shards off the device (ZeRO-Infinity's parameter offload, stage 3): each held unit's
 * shard — `length` elements of the unit's dtype, f32 values or 16-bit bits — lives in host memory
 * (`offload_param.device: "cpu"`) or in a file under `nvme_path` (`"nvme"`). The device gets a copy
 * only while the unit is gathered or about to be (the gather wrapper's prefetch window,
 * gather-window.ts); the engine's UnitHandle does the copies (`prefetchParams`, `paramStorage`,
 * `evictParams`).
 *
 * NVMe shards keep a host cache bounded by `offload_param.max_in_cpu` elements and
 * `offload_param.buffer_count` shards (least recently used out first); a shard larger than
 * `offload_param.buffer_size` elements is refused, as DeepSpeed refuses a parameter larger than its
 * swap buffers.
 */
import { closeSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from "node:fs";
import { ConfigError } from "@zeromoe/core/config";
import type { HostParamShard } from "@zeromoe/core/plugin";
import { DTYPE_BYTES } from "@zeromoe/kernels";
import type { HostLedger } from "./host-ledger.ts";
import { withPath } from "./path-error.ts";
import { withErrnoCode } from "@zeromoe/kernels/runtime";

/** Storage dtype of a shard. */
export type ParamDtype = "f32" | "bf16" | "f16";

function alloc(dtype: ParamDtype, n: number): Float32Array | Uint16Array {
  return dtype === "f32" ? new Float32Array(new SharedArrayBuffer(Math.max(1, n) * 4), 0, n) : new Uint16Array(new SharedArrayBuffer(Math.max(1, n) * 2), 0, n);
}

/** A shard in host memory. */
export class CpuParamShard implements HostParamShard {
  readonly device = "cpu" as const;
  readonly data: Float32Array | Uint16Array;
  private freed = false;
  constructor(readonly length: number, readonly dtype: ParamDtype, private readonly ledger: HostLedger) {
    this.data = alloc(dtype, length);
    ledger.addHost("param", length * DTYPE_BYTES[dtype]);
  }
  loadSync(): Float32Array | Uint16Array {
    return this.data;
  }
  async write(off: number, data: Float32Array | Uint16Array): Promise<void> {
    if (off < 0 || off + data.length > this.length) throw new Error(`offload: parameter shard range [${off}, ${off + data.length}) outside [0, ${this.length})`);
    (this.data as Float32Array).set(data as Float32Array, off);
  }
  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.ledger.addHost("param", -this.length * DTYPE_BYTES[this.dtype]);
  }
}

/** LRU host cache of NVMe shards (see the module comment). */
export class ParamCache {
  private readonly entries = new Map<NvmeParamShard, Float32Array | Uint16Array>();
  private elements = 0;
  constructor(readonly maxElements: number, readonly maxShards: number, private readonly ledger: HostLedger) {}
  get(s: NvmeParamShard): Float32Array | Uint16Array | undefined {
    const a = this.entries.get(s);
    if (a) {
      this.entries.delete(s); // most recent last
      this.entries.set(s, a);
    }
    return a;
  }
  put(s: NvmeParamShard, a: Float32Array | Uint16Array): void {
    this.drop(s);
    if (s.length > this.maxElements || this.maxShards === 0) return;
    while (this.entries.size >= this.maxShards || this.elements + s.length > this.maxElements) {
      const oldest = this.entries.keys().next().value as NvmeParamShard;
      this.drop(oldest);
    }
    this.entries.set(s, a);
    this.elements += s.length;
    this.ledger.addHost("param", a.byteLength);
  }
  drop(s: NvmeParamShard): void {
    const a = this.entries.get(s);
    if (!a) return;
    this.entries.delete(s);
    this.elements -= s.length;
    this.ledger.addHost("param", -a.byteLength);
  }
  /** Elements cached now. */
  get size(): number {
    return this.elements;
  }
}

/** Run a file-system call; a system error gets `path` appended to its message (path-error.ts). */
function fsCall<T>(path: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw withPath(e, path);
  }
}

/** A shard in a file under nvme_path, cached in host memory within {@link ParamCache}'s bounds. */
export class NvmeParamShard implements HostParamShard {
  readonly device = "nvme" as const;
  private readonly fd: number;
  private freed = false;
  constructor(readonly path: string, readonly length: number, readonly dtype: ParamDtype, private readonly cache: ParamCache, private readonly ledger: HostLedger) {
    try {
      this.fd = openSync(path, "w+");
      ftruncateSync(this.fd, Math.max(1, length) * DTYPE_BYTES[dtype]);
    } catch (e) {
      // a file-system refusal (no space, file too large, …) is the nvme_path's problem: exit 2 naming it
      throw new ConfigError([{ path: "zero_optimization.offload_param.nvme_path", message: `cannot create ${path}: ${(withErrnoCode(e) as Error).message}; choose a directory on a drive with room for the parameter shards` }], "the offload settings cannot run");
    }
    ledger.addNvme("param", length * DTYPE_BYTES[dtype]);
  }
  loadSync(): Float32Array | Uint16Array {
    const hit = this.cache.get(this);
    if (hit) return hit;
    const a = alloc(this.dtype, this.length);
    const view = new Uint8Array(a.buffer, 0, a.byteLength);
    // a partial read is continued (POSIX allows one); nothing read is the end of the file
    for (let got = 0; got < a.byteLength;) {
      const n = fsCall(this.path, () => readSync(this.fd, view, got, a.byteLength - got, got));
      if (n === 0) throw new Error(`nvme parameter offload: short read of ${got} of ${a.byteLength} bytes from ${this.path} (end of file)`);
      got += n;
    }
    this.ledger.moved.nvme_read += a.byteLength;
    this.cache.put(this, a);
    return a;
  }
  async write(off: number, data: Float32Array | Uint16Array): Promise<void> {
    if (off < 0 || off + data.length > this.length) throw new Error(`offload: parameter shard range [${off}, ${off + data.length}) outside [0, ${this.length})`);
    const b = DTYPE_BYTES[this.dtype];
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    // a partial write is continued, so a full drive surfaces as its system error (ENOSPC, EFBIG)
    for (let done = 0; done < bytes.byteLength;) {
      const n = fsCall(this.path, () => writeSync(this.fd, bytes, done, bytes.byteLength - done, off * b + done));
      if (n === 0) throw new Error(`nvme parameter offload: short write of ${done} of ${bytes.byteLength} bytes to ${this.path}`);
      done += n;
    }
    this.ledger.moved.nvme_write += bytes.byteLength;
    const hit = this.cache.get(this);
    if (hit) (hit as Float32Array).set(data as Float32Array, off);
  }
  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.cache.drop(this);
    try {
      closeSync(this.fd);
      unlinkSync(this.path);
    } catch {
      // already gone
    }
    this.ledger.addNvme("param", -this.length * DTYPE_BYTES[this.dtype]);
  }
}
