/**
 * DeepSpeed's communication logger (`comms_logger`: enabled, verbose, prof_all, debug, prof_ops;
 * deepspeed/utils/comms_logging.py): every collective this rank runs is recorded by operation and
 * message size — count, bytes, total and mean latency, algorithmic and bus bandwidth — and a table
 * is printed at the end of the run (DeepSpeed's `log_summary()`).
 *
 * Definitions (nccl-tests' PERFORMANCE.md, which DeepSpeed's calc_bw_log follows):
 * - message size: the bytes of the collective's full array — all_reduce and broadcast the array,
 *   reduce_scatter the (n-part) input, all_gather the (n-part) output, all_to_all_v the send array.
 * - algbw = message size / time; busbw = algbw × factor with factor 2(n−1)/n for all_reduce,
 *   (n−1)/n for reduce_scatter, all_gather and all_to_all_v, 1 otherwise (n = group size).
 * - bytes: the nominal bytes this rank SENT (comm/stats.ts ring definitions), the same figure as
 *   the summary's `comm.per_rank`, so the two always agree.
 * Units: bytes, milliseconds; the printed table shows Gbps (10⁹ bits/s) as DeepSpeed does.
 */
import type { CollectiveName } from "../comm/communicator.ts";

/** DeepSpeed's `comms_logger` keys. */
export interface CommsLoggerConfig {
  enabled: boolean;
  /** Print one line per logged collective as it completes. */
  verbose: boolean;
  /** Log every collective (false: only those named in `prof_ops`). */
  prof_all: boolean;
  /** Append the calling function to the op name (`all_gather | gatherUnit`). */
  debug: boolean;
  /** Collectives logged when `prof_all` is false (names as in {@link CollectiveName}; DeepSpeed's
   * `all_to_all_single` is accepted for `all_to_all_v`). */
  prof_ops: string[];
}

/** One row of the table: one op at one message size. */
export interface CommsRecord {
  op: string;
  message_size: number;
  count: number;
  /** Nominal bytes sent over all calls. */
  bytes: number;
  total_ms: number;
  mean_ms: number;
  /** Mean algorithmic bandwidth, bytes/s (message size / time, over all calls). */
  algbw: number;
  /** Mean bus bandwidth, bytes/s. */
  busbw: number;
}

/** busbw / algbw for `op` over a group of `n` members (nccl-tests). */
export function busFactor(op: CollectiveName, n: number): number {
  if (n <= 1) return 0;
  if (op === "all_reduce") return (2 * (n - 1)) / n;
  if (op === "reduce_scatter" || op === "all_gather" || op === "all_to_all_v") return (n - 1) / n;
  return 1;
}

/** DeepSpeed op names accepted in `prof_ops` for ours. */
const DS_NAMES: Readonly<Record<string, CollectiveName>> = {
  all_to_all_single: "all_to_all_v",
  all_to_all: "all_to_all_v",
  all_gather_into_tensor: "all_gather",
  all_gather_base: "all_gather",
  reduce_scatter_tensor: "reduce_scatter",
  reduce_scatter_base: "reduce_scatter",
  inference_all_reduce: "all_reduce",
};

/** Records collectives (see the module comment). */
export class CommsLogger {
  private readonly rows = new Map<string, CommsRecord & { sec: number }>();
  private readonly ops: ReadonlySet<string>;

  /** @param print where `verbose` lines go (rank 0's log; a no-op elsewhere). */
  constructor(readonly config: CommsLoggerConfig, private readonly print: (line: string) => void = () => {}) {
    this.ops = new Set(config.prof_ops.map((o) => DS_NAMES[o] ?? o));
  }

  /** Whether `op` is logged under prof_all / prof_ops. */
  logs(op: CollectiveName): boolean {
    return this.config.enabled && (this.config.prof_all || this.ops.has(op));
  }

  /**
   * Record one call.
   * @param messageBytes the collective's message size (module comment); @param groupSize n;
   * @param sentBytes nominal bytes sent; @param ms latency; @param caller function name (debug).
   */
  record(op: CollectiveName, messageBytes: number, groupSize: number, sentBytes: number, ms: number, caller?: string): void {
    if (!this.logs(op)) return;
    const name = this.config.debug && caller ? `${op} | ${caller}` : op;
    const key = `${name}\u0000${messageBytes}`;
    let r = this.rows.get(key);
    if (!r) {
      r = { op: name, message_size: messageBytes, count: 0, bytes: 0, total_ms: 0, mean_ms: 0, algbw: 0, busbw: 0, sec: 0 };
      this.rows.set(key, r);
    }
    r.count++;
    r.bytes += sentBytes;
    r.total_ms += ms;
    r.mean_ms = r.total_ms / r.count;
    const s = Math.max(ms, 1e-6) / 1000;
    // means of the per-call bandwidths, as DeepSpeed's log_summary averages its per-call figures
    const alg = messageBytes / s;
    r.algbw += (alg - r.algbw) / r.count;
    r.busbw += (alg * busFactor(op, groupSize) - r.busbw) / r.count;
    if (this.config.verbose) {
      this.print(`comm op: ${name} | time (ms): ${ms.toFixed(3)} | msg size: ${formatSize(messageBytes)} | algbw (Gbps): ${gbps(alg)} | busbw (Gbps): ${gbps(alg * busFactor(op, groupSize))}`);
    }
  }

  /** The table, ordered by op then message size. */
  records(): CommsRecord[] {
    return [...this.rows.values()]
      .map(({ sec: _s, ...r }) => r)
      .sort((a, b) => (a.op === b.op ? a.message_size - b.message_size : a.op < b.op ? -1 : 1));
  }
}

/** 10⁹ bits per second, 2 decimals. */
function gbps(bytesPerSecond: number): string {
  return ((bytesPerSecond * 8) / 1e9).toFixed(2);
}

/** "4.0 KB" style sizes (powers of 1024, as DeepSpeed's convert_size). */
export function formatSize(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v.toFixed(0) : v.toFixed(2)} ${units[i]}`;
}

/** DeepSpeed's `log_summary()` table of `records` (one header line, one line per row). */
export function formatCommsSummary(records: readonly CommsRecord[], rank: number): string[] {
  const head = ["Comm. Op", "Message Size", "Count", "Total Bytes", "Total Latency(ms)", "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)"];
  const rows = records.map((r) => [r.op, formatSize(r.message_size), String(r.count), formatSize(r.bytes), r.total_ms.toFixed(2), r.mean_ms.toFixed(3), gbps(r.algbw), gbps(r.busbw)]);
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!))).join("  ");
  return [`comms summary (rank ${rank})`, line(head), ...rows.map(line)];
}
