/**
 * `bun run train` with moe.etp_size (docs/moe.md "Expert tensor parallelism"): world 2, the default
 * job, etp 2 — trains, saves a checkpoint and resumes it at etp 2 to the uninterrupted run's final
 * loss (printed to 4 decimals); a resume at etp 1, --init-from, --save-init and zero-to-fp32 of an
 * etp checkpoint are refused with exit 2 and a message naming moe.etp_size (or saying why).
 */
import { describe, expect, test } from "@zeromoe/kernels/runtime/bdd";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import { scriptArgv } from "@zeromoe/kernels/runtime";

const ROOT = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");
const cli = (script: string, args: string[]) => {
  const [cmd, ...pre] = scriptArgv(join(ROOT, "core/src/cli", `${script}.ts`));
  const r = spawnSync(cmd!, [...pre, ...args], { cwd: ROOT, env: { ...process.env, CI: "1" }, stdio: ["ignore", "pipe", "pipe"], timeout: 300_000, killSignal: "SIGKILL" });
  return { code: r.status ?? -1, out: r.stdout.toString() + r.stderr.toString() };
};
const finalLoss = (out: string) => /final loss (\d+\.\d+)/.exec(out)?.[1];
const base = ["--set", "world_size=2", "--set", "moe.etp_size=2", "--backend", "cpu"];

describe("the trainer with moe.etp_size 2", () => {
  test("save at step 1, resume to step 3 = 3 steps straight; the refusals exit 2", () => {
    const dir = mkdtempSync(join(tmpdir(), "zeromoe-etp-cli-"));
    try {
      const whole = cli("train", [...base, "--set", "steps=3"]);
      expect(whole.code).toBe(0);
      const first = cli("train", [...base, "--set", "steps=1", "--set", `checkpoint.dir=${dir}`]);
      expect(first.code).toBe(0);
      const tag = join(dir, "global_step1");
      const resumed = cli("train", [...base, "--set", "steps=3", "--set", `checkpoint.dir=${dir}`, "--resume", tag]);
      expect(resumed.code).toBe(0);
      expect(finalLoss(resumed.out)).toBe(finalLoss(whole.out)!);
      const other = cli("train", ["--set", "world_size=2", "--set", "moe.ep_size=2", "--backend", "cpu", "--set", "steps=3", "--set", `checkpoint.dir=${dir}`, "--resume", tag]);
      expect(other.code).toBe(2);
      expect(other.out).toContain("moe.etp_size: checkpoint");
      expect(other.out).toContain("was saved with etp_size 2, the job has 1");
      const z = cli("zero-to-fp32", [tag, join(dir, "out.safetensors")]);
      expect(z.code).toBe(2);
      expect(z.out).toContain("was saved with moe.etp_size 2");
      const fake = join(dir, "w.safetensors");
      writeFileSync(fake, "x");
      const init = cli("train", [...base, "--set", "steps=1", "--init-from", fake]);
      expect(init.code).toBe(2);
      expect(init.out).toContain("--init-from with moe.etp_size 2");
      const save = cli("train", [...base, "--set", "steps=1", "--save-init", join(dir, "init")]);
      expect(save.code).toBe(2);
      expect(save.out).toContain("--save-init with moe.etp_size 2");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
