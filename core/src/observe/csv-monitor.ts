/**
 * DeepSpeed's CSV monitor (`csv_monitor {enabled, output_path, job_name}`;
 * deepspeed/monitor/csv_monitor.py): rank 0 writes one file per event tag,
 * `<output_path>/<job_name>/<tag with "/" and " " replaced by "_">.csv`, whose first row is
 * `step,<last "/"-part of the tag>` and every further row `step,value`. Files are appended to, as
 * DeepSpeed does (a second run with the same job name continues them; the header is written the
 * first time this run writes the file). DeepSpeed's default folder when `output_path` is empty is
 * `~/csv_monitor`.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** A scalar event: (tag, value, step) as DeepSpeed's `write_events` takes them. */
export type MonitorEvent = readonly [tag: string, value: number, step: number];

/** `csv_monitor` / `tensorboard` / `wandb` keys. */
export interface MonitorConfig {
  enabled: boolean;
  output_path: string;
  job_name: string;
}

/** The folder a monitor writes to: `<output_path>/<job_name>`, or `~/<fallback>/<job_name>`. */
export function monitorDir(c: MonitorConfig, fallback: string): string {
  return join(c.output_path !== "" ? c.output_path : join(homedir(), fallback), c.job_name);
}

/** A value as Python's `csv.writer` writes a float (repr: shortest round-trip digits). */
function pyFloat(v: number): string {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  return Number.isInteger(v) ? v.toFixed(1) : String(v);
}

/** Writes CSV files (module comment). Create it on rank 0 only. */
export class CsvMonitor {
  readonly dir: string;
  private readonly seen = new Set<string>();

  /** @throws Error naming the folder when it cannot be created. */
  constructor(c: MonitorConfig) {
    this.dir = monitorDir(c, "csv_monitor");
    try {
      mkdirSync(this.dir, { recursive: true });
    } catch (e) {
      throw new Error(`csv_monitor: cannot create ${this.dir}: ${(e as Error).message}`);
    }
  }

  /** Path of the file of `tag`. */
  fileOf(tag: string): string {
    return join(this.dir, `${tag.replaceAll("/", "_").replaceAll(" ", "_")}.csv`);
  }

  /** Files written so far. */
  files(): string[] {
    return [...this.seen];
  }

  /** Append `events` (module comment). */
  write(events: readonly MonitorEvent[]): void {
    for (const [tag, value, step] of events) {
      const file = this.fileOf(tag);
      let text = "";
      if (!this.seen.has(file)) {
        this.seen.add(file);
        text += `step,${tag.split("/").pop()}\r\n`;
      }
      text += `${step},${pyFloat(value)}\r\n`;
      appendFileSync(file, text);
    }
  }
}
