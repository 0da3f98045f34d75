/**
 * The job key `lm_z_loss_coef` (PaLM's z-loss on the LM head) reaches the model and changes the
 * trained loss by exactly the z-loss term: one step of the tiny job with coefficient c against the
 * same step with 0, on one rank (cpu). The step-1 loss is computed before any update, so the
 * difference is c·mean(lse²) over the scored tokens of the same batch — checked against that term
 * computed from the materialised logits (logitsZLoss) within f32 rounding (1e-5 relative).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { resolveJobConfig } from "@zeromoe/core/config";
import { microBatch, tinyJob } from "@zeromoe/core/testing";
import { createSoloCommunicator } from "../../src/comm/solo.ts";
import { Engine } from "../../src/engine/engine.ts";
import { shiftLabels } from "../../src/models/llama.ts";
import { logitsZLoss, noGrad } from "../../src/tensor/index.ts";

async function firstLoss(coef: number): Promise<{ loss: number; zTerm: number; modelCoef: number }> {
  const { config } = resolveJobConfig(tinyJob({ lm_z_loss_coef: coef }));
  const be = new CpuBackend();
  const engine = await Engine.create({ config, comm: createSoloCommunicator(), backend: be, plugins: [], log: () => {} });
  const mb = microBatch(0, 0, config.train_micro_batch_size_per_gpu, config.data.seq_len, config.model.vocab_size);
  // the z-loss term of this batch at the initial weights, from the materialised logits
  const zTerm = await noGrad(async () => {
    const out = await engine.model.forward({ inputIds: mb.inputIds, labels: mb.labels, batch: mb.batch, seq: mb.seq, returnLogits: true });
    const { targets, numValid } = shiftLabels(mb.labels, mb.batch, mb.seq);
    const z = await logitsZLoss(out.logits!, targets, numValid, 1).item();
    out.logits!.dispose();
    out.loss!.dispose();
    return z;
  });
  const r = await engine.trainBatch([mb]);
  return { loss: r.loss, zTerm, modelCoef: engine.model.lmZLossCoef };
}

describe("lm_z_loss_coef", () => {
  test("reaches the model and adds coef·mean(lse²) to the training loss", async () => {
    const off = await firstLoss(0);
    const on = await firstLoss(0.05);
    expect(off.modelCoef).toBe(0);
    expect(on.modelCoef).toBe(0.05);
    expect(on.zTerm).toBeGreaterThan(1); // lse ≈ log(vocab) at init: the term is not negligible
    expect(Math.abs(on.loss - off.loss - 0.05 * on.zTerm) / on.loss).toBeLessThan(1e-5);
  });

  test("a negative coefficient is refused, naming the key", () => {
    expect(() => resolveJobConfig(tinyJob({ lm_z_loss_coef: -1 }))).toThrow(/lm_z_loss_coef/);
  });
});
