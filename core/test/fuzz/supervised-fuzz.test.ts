/**
 * The supervised fuzz (supervise.ts) at a small scale in the suite: every reader of untrusted input
 * — safetensors, rank files, DeepSpeed and job configs, Hub config.json + index, re-signed
 * manifests, tokenizer.json — runs its cases in a worker subprocess bounded at 30 s per case and
 * 1 GiB resident; each must end in success or the reader's own error, with a message of at most
 * 1 KiB. 40 cases per reader here (ZEROMOE_FUZZ_CASES to change); the scale:
 * `bun core/test/fuzz/supervise.ts --cases 10000` (docs/checkpoints.md gives the figures of a run).
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const CASES = Number(process.env.ZEROMOE_FUZZ_CASES ?? 40);

test(`${CASES} supervised cases per reader: no crash, hang, RSS overrun or long message`, async () => {
  const p = Bun.spawn(["bun", join(import.meta.dir, "supervise.ts"), "--cases", String(CASES), "--timeout-s", "30", "--rss-mib", "1024"], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  const code = await p.exited;
  const tallies = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(tallies.map((t) => t.reader)).toEqual(["safetensors", "rankFile", "deepspeed", "jobConfig", "hubConfig", "manifest", "tokenizer"]);
  for (const t of tallies) {
    expect(t.cases, String(t.reader)).toBe(CASES);
    expect({ reader: t.reader, crashes: t.crashes, hangs: t.hangs, rssOver: t.rssOver, longMessages: t.longMessages, examples: t.examples }).toEqual({ reader: t.reader, crashes: 0, hangs: 0, rssOver: 0, longMessages: 0, examples: [] });
  }
  expect(code, err.slice(-2000)).toBe(0);
}, 900_000);
