/**
 * The fine-tuning example end to end (examples/fine-tune, docs/fine-tuning.md "Example"): a tiny
 * Hub-style Qwen3-MoE directory generated here (config.json, Qwen3's real tokenizer.json and
 * tokenizer_config.json with its chat template, random weights), the example job (packed chat
 * data, ZeRO-3, AutoEP over 2 ranks, cpu) trained for 2 steps through the CLI, then `generate
 * --chat` from its checkpoint (and `eval` from it reproduces the run's val_loss on the masked rows): the prompt it feeds the model is the template's rendering of the
 * user turn with the generation prompt.
 */
import { describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const REPO = resolve(import.meta.dirname, "../../../..");
const EXAMPLE = join(REPO, "examples/fine-tune");

function run(args: string[]): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(["bun", ...args], { cwd: REPO, stdout: "pipe", stderr: "pipe", env: { ...process.env, CI: "1" }, timeout: 280_000, killSignal: "SIGKILL" });
  return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
}

describe("examples/fine-tune", () => {
  test("trains the tiny Qwen3-MoE directory on chat data (ZeRO-3, AutoEP, packed) and generates with the chat template", () => {
    const dir = mkdtempSync(join(tmpdir(), "zeromoe-ft-example-"));
    const mk = run(["examples/fine-tune/make-tiny-model.ts", join(dir, "tiny-qwen3-moe")]);
    expect(mk.err).toBe("");
    expect(mk.code).toBe(0);
    for (const f of ["job.json", "chat.jsonl"]) copyFileSync(join(EXAMPLE, f), join(dir, f));
    const t = run(["core/src/cli/train.ts", "--config", join(dir, "job.json"), "--backend", "cpu", "--set", "steps=2", "--set", "eval_interval=2", "--set", "steps_per_print=1"]);
    expect(t.err + t.out).not.toContain("error");
    expect(t.code).toBe(0);
    const log = t.out + t.err;
    expect(log).toMatch(/chat +96 conversations → \d+ rows \(packed\), \d+ scored labels \(assistant turns\); template .*tokenizer_config\.json chat_template/);
    expect(log).toContain("ZeRO stage 3");
    expect(log).toMatch(/moe +ep_size 2/);
    const losses = [...log.matchAll(/step \d\/2 \| loss ([\d.]+)/g)].map((m) => Number(m[1]));
    expect(losses.length).toBe(2);
    // random weights over Qwen3's 151,936 ids: the first loss is near ln(151936) = 11.93
    expect(Math.abs(losses[0]! - Math.log(151936))).toBeLessThan(0.5);
    // eval from the checkpoint scores the same validation rows with the same labels: the run's val_loss
    const val = Number(/eval step 2 \| val_loss ([\d.]+)/.exec(log)![1]);
    const e = run(["core/src/cli/eval.ts", "--from", join(dir, "out/checkpoints"), "--backend", "cpu"]);
    expect(e.code).toBe(0);
    // within the router's aux term: training's val_loss is the model's loss, which includes
    // router_aux_loss_coef (0.001) × aux (≈ 2 at init), and eval scores cross-entropy only
    const ev = Number(/eval +loss ([\d.]+)/.exec(e.out)![1]);
    expect(val - ev).toBeGreaterThanOrEqual(0);
    expect(val - ev).toBeLessThan(0.004);
    const g = run(["core/src/cli/generate.ts", "--from", join(dir, "out/checkpoints"), "--chat", "--system", "You answer in one short sentence.", "--prompt", "What is the capital of Peru?", "--max-new-tokens", "3", "--backend", "cpu"]);
    expect(g.err).not.toContain("error");
    expect(g.code).toBe(0);
    expect(g.out.startsWith("<|im_start|>system\nYou answer in one short sentence.<|im_end|>\n<|im_start|>user\nWhat is the capital of Peru?<|im_end|>\n<|im_start|>assistant\n")).toBe(true);
    expect(g.err).toMatch(/chat +template .*tokenizer_config\.json chat_template/);
    // --system without --chat is refused
    const bad = run(["core/src/cli/generate.ts", "--from", join(dir, "out/checkpoints"), "--system", "x", "--prompt", "y"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("--system applies with --chat only");
  }, 300_000);
});
