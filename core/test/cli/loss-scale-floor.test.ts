/**
 * fp16 loss scale at min_loss_scale with gradients still overflowing (issue 17): the run stops with
 * ONE message (not one per rank, no stack trace) that says what to change, exit status 4 (the
 * status of a run stopped for divergence), at world sizes 1 and 2.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../../..");
const dir = mkdtempSync(join(tmpdir(), "loss-scale-floor-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// a floor of 2^40: the default model's scaled fp16 gradients overflow at it on every step
const DS = { fp16: { enabled: true, initial_scale_power: 41, min_loss_scale: 2 ** 40, hysteresis: 1 } };

for (const ws of [1, 2]) {
  test(`world size ${ws}: one message saying what to change, no stack, exit 4`, async () => {
    const file = join(dir, "ds.json");
    writeFileSync(file, JSON.stringify(DS));
    const p = Bun.spawn(["bun", "core/src/cli/train.ts", "--deepspeed", file, "--backend", "cpu", "--world-size", String(ws), "--steps", "6"], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" } });
    const [o, e] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    const out = o + e;
    expect({ code: await p.exited, out }).toMatchObject({ code: 4 });
    expect(out.split("min_loss_scale 1099511627776").length - 1).toBe(1);
    expect(out).toContain("lower fp16.min_loss_scale");
    expect(out).toContain("bf16.enabled true");
    expect(out).not.toMatch(/^\s+at /m);
    expect(out).not.toContain("rank 1");
    expect(out).not.toContain("LossScaleError");
  }, 300_000);
}
