/**
 * Optimizer states of one unit in host memory (ZeRO-Offload): master, m and v, `length` f32
 * elements each, in one SharedArrayBuffer so the host AdamW threads (adamw-pool.ts) update them in
 * place.
 */
import type { HostOptimizerState, OptimizerStateName } from "@zeromoe/core/plugin";
import type { HostLedger } from "./host-ledger.ts";

const INDEX: Readonly<Record<OptimizerStateName, number>> = { master: 0, m: 1, v: 2 };

/** Host-memory optimizer states (see the module comment). */
export class CpuOptimizerState implements HostOptimizerState {
  readonly device = "cpu" as const;
  readonly length: number;
  readonly master: Float32Array;
  readonly m: Float32Array;
  readonly v: Float32Array;
  private readonly ledger: HostLedger;
  private freed = false;

  /** @param length elements per state (the unit's optimLength) */
  constructor(length: number, ledger: HostLedger) {
    this.length = length;
    const sab = new SharedArrayBuffer(3 * length * 4);
    this.master = new Float32Array(sab, 0, length);
    this.m = new Float32Array(sab, length * 4, length);
    this.v = new Float32Array(sab, 2 * length * 4, length);
    this.ledger = ledger;
    ledger.addHost("optim", 12 * length);
  }

  /** The array of `state`. */
  array(state: OptimizerStateName): Float32Array {
    return state === "master" ? this.master : state === "m" ? this.m : this.v;
  }

  async read(state: OptimizerStateName, off: number, n: number): Promise<Float32Array> {
    check(this, state, off, n);
    return this.array(state).slice(off, off + n);
  }

  async write(state: OptimizerStateName, off: number, data: Float32Array): Promise<void> {
    check(this, state, off, data.length);
    this.array(state).set(data, off);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.ledger.addHost("optim", -12 * this.length);
  }
}

/** Range check shared by the host states. @throws naming the state and the range. */
export function check(s: { length: number }, state: OptimizerStateName, off: number, n: number): void {
  if (!(state in INDEX)) throw new Error(`offload: unknown optimizer state "${state}" (master, m or v)`);
  if (!Number.isInteger(off) || !Number.isInteger(n) || off < 0 || n < 0 || off + n > s.length) {
    throw new Error(`offload: optimizer state "${state}" range [${off}, ${off + n}) outside [0, ${s.length})`);
  }
}
