/**
 * The engine on Deno against Bun (issue 33; README "Bun or Deno"): `deno task train` (deno.json, its
 * stated permissions) trains the default job on the cpu backend and a two-rank ZeRO-3 + expert
 * parallelism 2 job with losses bit-identical to `bun core/src/cli/train.ts`; and `deno test` runs
 * a plugin suite (zero1) and the dual-runtime test API's own suite (kernels/src/runtime/bdd.ts).
 * Deno is the pinned devDependency (node_modules/.bin/deno).
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../../..");
const DENO = join(ROOT, "node_modules", ".bin", "deno");
const ENV = { ...process.env, CI: "1", NO_COLOR: "1", XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? "/tmp" };

async function run(cmd: string[]): Promise<{ code: number; out: string }> {
  const p = Bun.spawn(cmd, { cwd: ROOT, env: ENV, stdout: "pipe", stderr: "pipe" });
  const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code: await p.exited, out: o + e };
}

/** Train with `args` on Bun and on Deno; returns both summaries' losses and validation losses. */
async function both(args: string[]): Promise<{ bun: { losses: number[]; val_loss: number }; deno: { losses: number[]; val_loss: number } }> {
  const dir = mkdtempSync(join(tmpdir(), "zeromoe-deno-train-"));
  try {
    const b = await run(["bun", "core/src/cli/train.ts", ...args, "--summary", join(dir, "bun.json")]);
    expect(b.code, b.out).toBe(0);
    const d = await run([DENO, "task", "train", ...args, "--summary", join(dir, "deno.json")]);
    expect(d.code, d.out).toBe(0);
    const read = (f: string) => JSON.parse(readFileSync(join(dir, f), "utf8")) as { losses: number[]; val_loss: number };
    return { bun: read("bun.json"), deno: read("deno.json") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("deno is installed (bun install)", () => {
  expect(existsSync(DENO) ? "present" : `missing ${DENO} (run bun install)`).toBe("present");
});

test("deno task train: the default job on the cpu backend, 20 steps, losses bit-identical to Bun's", async () => {
  const r = await both(["--backend", "cpu", "--steps", "20", "--set", "eval_interval=20"]);
  expect(r.bun.losses.length).toBe(20);
  expect(r.deno.losses).toEqual(r.bun.losses);
  expect(r.deno.val_loss).toBe(r.bun.val_loss);
}, 300_000);

test("deno task train: two ranks, ZeRO-3 + ep 2 on Deno's worker threads, losses bit-identical to Bun's", async () => {
  const r = await both(["--config", "examples/moe-zero3-ep2.json", "--backend", "cpu", "--steps", "3"]);
  expect(r.bun.losses.length).toBe(3);
  expect(r.deno.losses).toEqual(r.bun.losses);
}, 300_000);

test("deno test runs a plugin suite and the dual-runtime test API's suite", async () => {
  const r = await run([DENO, "test", "--no-check", "--no-prompt", "--allow-read", "--allow-write", "--allow-env", "--allow-sys", "--allow-ffi", "--allow-run", "plugins/zero1", "kernels/test/runtime"]);
  expect(r.code, r.out).toBe(0);
  expect(r.out).toMatch(/ok \| 2 passed \(\d+ steps\) \| 0 failed/);
}, 300_000);
