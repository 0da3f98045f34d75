/**
 * Training progress output. On a terminal: one self-redrawing line with a bar, step, rate, ETA
 * and the latest metrics; log lines print above it. Elsewhere (CI, pipes, files): plain lines,
 * one per `printEvery` steps and at the end, no control characters. No dependency.
 */

/** Where progress goes; `process.stderr` fits. */
export interface ProgressSink {
  write(s: string): unknown;
  /** Terminal? Decides bar vs plain lines. */
  isTTY?: boolean;
  /** Terminal width in columns (default 100). */
  columns?: number;
}

/** Options of {@link Progress}. */
export interface ProgressOptions {
  /** Total steps (> 0; 0 is shown as a bare counter). */
  total: number;
  /** Prefix, e.g. "train". */
  label?: string;
  /** Plain mode: print every N steps (default 10; DeepSpeed's steps_per_print). */
  printEvery?: number;
  sink?: ProgressSink;
  /** Force the mode (default: `sink.isTTY`; never a bar when env CI is set). */
  tty?: boolean;
  /** Clock in ms (for tests). */
  now?: () => number;
}

/** Metrics shown after the counter, e.g. `{loss: 2.31, lr: 0.003}`. */
export type ProgressFields = Record<string, number | string>;

/** "1h02m", "3m07s", "12.3s". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  return h > 0 ? `${h}h${String(m).padStart(2, "0")}m` : `${m}m${String(r).padStart(2, "0")}s`;
}

/** Compact number: 4 significant digits, exponent form outside [1e-3, 1e5). */
export function formatValue(v: number | string): string {
  if (typeof v === "string") return v;
  if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return v.toPrecision(4);
}

function formatFields(fields: ProgressFields): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k} ${formatValue(v)}`)
    .join("  ");
}

/** See the module comment. */
export class Progress {
  readonly tty: boolean;
  private readonly sink: ProgressSink;
  private readonly now: () => number;
  private readonly start: number;
  private step = 0;
  private fields: ProgressFields = {};
  private drawn = false;
  private lastPrinted = -1;

  constructor(private readonly o: ProgressOptions) {
    if (!(o.total >= 0) || !Number.isInteger(o.total)) throw new RangeError(`Progress: total must be an integer >= 0, got ${o.total}`);
    this.sink = o.sink ?? process.stderr;
    this.tty = o.tty ?? (this.sink.isTTY === true && !process.env.CI);
    this.now = o.now ?? (() => performance.now());
    this.start = this.now();
  }

  private line(): string {
    const { total } = this.o;
    const elapsed = (this.now() - this.start) / 1000;
    const rate = this.step > 0 && elapsed > 0 ? this.step / elapsed : 0;
    const eta = rate > 0 ? formatDuration((total - this.step) / rate) : "?";
    const label = this.o.label ? `${this.o.label} ` : "";
    const counter = total > 0 ? `${this.step}/${total}` : `${this.step}`;
    const f = formatFields(this.fields);
    const tail = `${counter}  ${rate > 0 ? formatValue(rate) : "-"} it/s  eta ${eta}${f ? "  " + f : ""}`;
    if (!this.tty) return `${label}step ${tail}`;
    const width = this.sink.columns ?? 100;
    const barWidth = Math.max(10, Math.min(30, width - label.length - tail.length - 4));
    const filled = total > 0 ? Math.round((barWidth * Math.min(this.step, total)) / total) : 0;
    const bar = "█".repeat(filled) + "░".repeat(barWidth - filled);
    const s = `${label}${bar} ${tail}`;
    return s.length > width - 1 ? s.slice(0, width - 1) : s;
  }

  /** Record that `step` steps are done, with the latest metrics. Redraws (tty) or prints every
   * `printEvery` steps and at the last step (plain). */
  update(step: number, fields: ProgressFields = {}): void {
    this.step = step;
    this.fields = { ...this.fields, ...fields };
    if (this.tty) {
      this.sink.write(`\r\x1b[2K${this.line()}`);
      this.drawn = true;
    } else {
      const every = this.o.printEvery ?? 10;
      if (step !== this.lastPrinted && (step % every === 0 || step === this.o.total)) {
        this.sink.write(this.line() + "\n");
        this.lastPrinted = step;
      }
    }
  }

  /** Print a message line (e.g. an eval result) without breaking the bar. */
  log(message: string): void {
    if (this.tty && this.drawn) this.sink.write(`\r\x1b[2K${message}\n${this.line()}`);
    else this.sink.write(message + "\n");
  }

  /** Finish: final line with a newline (tty), or the last plain line if not printed yet. */
  done(): void {
    if (this.tty) {
      this.sink.write(`\r\x1b[2K${this.line()}\n`);
      this.drawn = false;
    } else if (this.lastPrinted !== this.step) {
      this.sink.write(this.line() + "\n");
      this.lastPrinted = this.step;
    }
  }
}
