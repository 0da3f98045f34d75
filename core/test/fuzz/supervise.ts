/**
 * Supervised fuzz of every reader of untrusted input (readers.ts): each case runs in a worker
 * subprocess (worker.ts) under a time bound and a resident-memory bound; a case past either is
 * killed with its worker (counted as a hang or an RSS overrun) and the next case gets a fresh one.
 *
 * ```
 * bun core/test/fuzz/supervise.ts [--readers a,b,…] [--cases N] [--seed S] [--timeout-s 10]
 *   [--rss-mib 1024] [--budget-s SECONDS] [--out tally.json]
 * ```
 * `--budget-s` stops a reader early (the counts say how many ran). Prints one JSON line per reader:
 * `{reader, cases, ok, clean, crashes, hangs, rssOver, peakRssMiB, maxMessage, longMessages,
 * examples}` — crashes are any error but the reader's own type; `longMessages` counts messages over
 * 1 KiB; `examples` holds the first few crashes, hangs and long messages with their case numbers
 * (a case is reproduced by its reader, seed and case number). Exit 0 when every reader had 0
 * crashes, 0 hangs, 0 RSS overruns and no message over 1 KiB, else 1.
 *
 * The worker's environment caps the memory the checks assume (ZEROMOE_HOST_MEMORY_LIMIT, below the
 * RSS bound), as an operator's budget would: a model the budget cannot hold must be refused before
 * it is allocated, not killed by the supervisor.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { READERS } from "./readers.ts";

const WORKER = join(import.meta.dir, "worker.ts");

interface Options {
  readers: string[];
  cases: number;
  seed: number;
  timeoutS: number;
  rssMiB: number;
  budgetS: number;
  out: string | null;
}

function parse(argv: string[]): Options {
  const o: Options = { readers: Object.keys(READERS), cases: 10_000, seed: 20261203, timeoutS: 10, rssMiB: 1024, budgetS: Infinity, out: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]!;
    const v = argv[++i];
    if (v === undefined) throw new Error(`${k}: missing value`);
    if (k === "--readers") o.readers = v.split(",");
    else if (k === "--cases") o.cases = Number(v);
    else if (k === "--seed") o.seed = Number(v);
    else if (k === "--timeout-s") o.timeoutS = Number(v);
    else if (k === "--rss-mib") o.rssMiB = Number(v);
    else if (k === "--budget-s") o.budgetS = Number(v);
    else if (k === "--out") o.out = v;
    else throw new Error(`unknown option ${k}`);
  }
  for (const r of o.readers) if (!READERS[r]) throw new Error(`unknown reader ${r} (one of ${Object.keys(READERS).join(", ")})`);
  return o;
}

/** Resident set of `pid`, MiB (0 when it is gone). */
function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** A worker process and a line reader on its stdout. */
class Worker {
  private buf = "";
  private readonly lines: string[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  readonly proc: Bun.Subprocess<"pipe", "pipe", "ignore">;

  constructor(reader: string, seedDir: string, workDir: string, rssMiB: number) {
    this.proc = Bun.spawn(["bun", WORKER, reader, seedDir, workDir], {
      stdin: "pipe", stdout: "pipe", stderr: "ignore",
      env: { ...process.env, CI: "1", ZEROMOE_HOST_MEMORY_LIMIT: `${Math.floor(rssMiB * 0.6)}MiB` },
    });
    void this.pump();
  }

  private async pump(): Promise<void> {
    const dec = new TextDecoder();
    for await (const chunk of this.proc.stdout) {
      this.buf += dec.decode(chunk);
      let nl: number;
      while ((nl = this.buf.indexOf("\n")) >= 0) {
        this.lines.push(this.buf.slice(0, nl));
        this.buf = this.buf.slice(nl + 1);
      }
      this.wake?.();
    }
    this.ended = true;
    this.wake?.();
  }

  /** The next line, or null when the worker ended, the time ran out, or `over()` became true. */
  async next(timeoutMs: number, over: () => boolean): Promise<{ line: string | null; why: "line" | "timeout" | "rss" | "ended" }> {
    const t0 = performance.now();
    for (;;) {
      const l = this.lines.shift();
      if (l !== undefined) return { line: l, why: "line" };
      if (this.ended) return { line: null, why: "ended" };
      if (over()) return { line: null, why: "rss" };
      if (performance.now() - t0 > timeoutMs) return { line: null, why: "timeout" };
      await new Promise<void>((res) => {
        this.wake = res;
        setTimeout(res, 50);
      });
      this.wake = null;
    }
  }

  send(line: string): void {
    this.proc.stdin.write(line + "\n");
    this.proc.stdin.flush();
  }

  kill(): void {
    this.proc.kill("SIGKILL");
  }
}

interface Example {
  case: number;
  kind: "crash" | "hang" | "rss" | "long message" | "worker ended";
  detail: string;
}

async function fuzzReader(name: string, o: Options, root: string): Promise<Record<string, unknown>> {
  const seedDir = join(root, `${name}-seed`);
  const workDir = join(root, `${name}-work`);
  const t = { reader: name, cases: 0, ok: 0, clean: 0, crashes: 0, hangs: 0, rssOver: 0, peakRssMiB: 0, maxMessage: 0, longMessages: 0, seconds: 0, examples: [] as Example[] };
  const note = (e: Example) => {
    if (t.examples.filter((x) => x.kind === e.kind).length < 5) t.examples.push(e);
  };
  const t0 = performance.now();
  let w: Worker | null = null;
  let peakCase = 0;
  const start = async (): Promise<Worker> => {
    const x = new Worker(name, seedDir, workDir, o.rssMiB);
    const r = await x.next(600_000, () => rssOf(x.proc.pid) > o.rssMiB);
    if (r.line !== "ready") throw new Error(`${name}: the worker did not start (${r.why}${r.line ? `: ${r.line}` : ""})`);
    return x;
  };
  for (let c = 0; c < o.cases; c++) {
    if ((performance.now() - t0) / 1000 > o.budgetS) break;
    w ??= await start();
    const wk = w;
    w.send(`${c} ${o.seed}`);
    let peak = 0;
    const r = await w.next(o.timeoutS * 1000, () => {
      peak = Math.max(peak, rssOf(wk.proc.pid));
      return peak > o.rssMiB;
    });
    t.cases++;
    if (r.why === "line") {
      const res = JSON.parse(r.line!) as { outcome: "ok" | "clean" | "crash"; name: string; message: string; messageLength: number; rssMiB: number };
      peak = Math.max(peak, res.rssMiB);
      if (res.outcome === "ok") t.ok++;
      else if (res.outcome === "clean") t.clean++;
      else {
        t.crashes++;
        note({ case: c, kind: "crash", detail: `${res.name}: ${res.message}` });
      }
      if (res.outcome !== "ok") {
        t.maxMessage = Math.max(t.maxMessage, res.messageLength);
        if (res.messageLength > 1024) {
          t.longMessages++;
          note({ case: c, kind: "long message", detail: `${res.messageLength} characters: ${res.message.slice(0, 160)}` });
        }
      }
    } else {
      w.kill();
      await w.proc.exited;
      w = null;
      if (r.why === "timeout") {
        t.hangs++;
        note({ case: c, kind: "hang", detail: `no answer in ${o.timeoutS} s` });
      } else if (r.why === "rss") {
        t.rssOver++;
        note({ case: c, kind: "rss", detail: `resident memory over ${o.rssMiB} MiB` });
      } else {
        t.crashes++;
        note({ case: c, kind: "worker ended", detail: `exit ${wk.proc.exitCode} signal ${wk.proc.signalCode}` });
      }
    }
    if (peak > t.peakRssMiB) {
      t.peakRssMiB = peak;
      peakCase = c;
    }
  }
  w?.kill();
  t.seconds = Math.round((performance.now() - t0) / 1000);
  return { ...t, peakRssMiB: Math.round(t.peakRssMiB), peakCase };
}

if (import.meta.main) {
  const o = parse(process.argv.slice(2));
  const root = mkdtempSync(join(tmpdir(), "zeromoe-supervised-fuzz-"));
  const all: Record<string, unknown>[] = [];
  let bad = false;
  try {
    for (const name of o.readers) {
      const t = await fuzzReader(name, o, root);
      all.push(t);
      console.log(JSON.stringify(t));
      if ((t.crashes as number) + (t.hangs as number) + (t.rssOver as number) + (t.longMessages as number) > 0) bad = true;
      if (o.out) writeFileSync(o.out, JSON.stringify(all, null, 1) + "\n");
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  process.exit(bad ? 1 : 0);
}
