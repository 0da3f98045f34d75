/**
 * Qwen3-MoE against Hugging Face Transformers 5.17 (core/test/fixtures/qwen3_moe, made by
 * scripts/hf-fixtures/make_moe_fixtures.py on the H200: 3 layers, layer 1 dense via mlp_only_layers,
 * head_dim 12 ≠ hidden/heads, 6 experts top-2, norm_topk_prob true, aux coef 0.02): logits, loss
 * (CE + 0.02·aux), aux loss, router logits of each MoE layer, every gradient — in both weight
 * layouts (save_pretrained's per-expert Hub file and Transformers 5's fused state dict), f32 cpu
 * backend. Tolerances: logits/loss/aux/router logits 1e-5 relative to the tensor's max, gradients
 * 1e-4 (observed below 1e-6).
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { resolveModelConfig } from "../../src/config/resolve-model.ts";
import type { Qwen3MoeConfig } from "../../src/config/types.ts";
import { Qwen3MoeForCausalLM } from "../../src/models/qwen3-moe.ts";
import type { GatingRequest, MoERouter, RoutingRequest } from "../../src/nn/moe/router.ts";
import { readGrad, type StateDict } from "../../src/nn/state-dict.ts";
import { backward } from "../../src/tensor/index.ts";

const dir = "core/test/fixtures/qwen3_moe";

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / Math.max(den, 1e-30);
}

async function run(weightsFile: string): Promise<{ worst: number; grads: number }> {
  const raw = JSON.parse(await Bun.file(`${dir}/config.json`).text());
  const cfg = resolveModelConfig(raw, "config").config as Qwen3MoeConfig;
  expect(cfg.model_type).toBe("qwen3_moe");
  expect(cfg.num_local_experts).toBe(6);
  expect(cfg.head_dim).toBe(12);
  const expected = readSafetensors(`${dir}/expected.safetensors`);
  const inputs = JSON.parse(await Bun.file(`${dir}/inputs.json`).text()) as { input_ids: number[][]; labels: number[][] };
  const be = new CpuBackend();
  const model = new Qwen3MoeForCausalLM(be, cfg);
  model.loadStateDict(readSafetensors(`${dir}/${weightsFile}`) as unknown as StateDict);
  // record the router logits of each MoE layer through a wrapping router
  const inner = model.moe.router;
  const logitsOf = new Map<number, ArrayLike<number>>();
  const spy: MoERouter = {
    name: "spy",
    get mixtralAuxCoef() {
      return inner.mixtralAuxCoef;
    },
    async gating(req: GatingRequest) {
      const t = await inner.gating(req);
      logitsOf.set(req.layer, await t.toArray());
      return t;
    },
    routing: (req: RoutingRequest) => inner.routing(req),
  };
  model.moe.router = spy;
  const out = await model.forward({ inputIds: inputs.input_ids.flat(), labels: inputs.labels.flat(), batch: 2, seq: 7, returnLogits: true });
  expect(relErr(await out.logits!.toArray(), expected.get("logits")!.data)).toBeLessThan(1e-5);
  expect(relErr([await out.loss!.item()], expected.get("loss")!.data)).toBeLessThan(1e-5);
  expect(relErr([await out.auxLoss!.item()], expected.get("aux_loss")!.data)).toBeLessThan(1e-5);
  expect([...logitsOf.keys()].sort()).toEqual([0, 2]);
  for (const [l, rl] of logitsOf) expect(relErr(rl, expected.get(`router_logits.${l}`)!.data)).toBeLessThan(1e-5);
  for (const [l, rl] of logitsOf) expect(relErr(rl, expected.get(`hf_router_logits.${l}`)!.data)).toBeLessThan(1e-5);
  await backward(out.loss!);
  let worst = 0;
  let grads = 0;
  for (const p of model.parameters()) {
    const ref = expected.get(`grad.${p.name}`);
    if (!ref) throw new Error(`fixture has no grad.${p.name}`);
    const err = relErr((await readGrad(p))!.data, ref.data);
    if (err > 1e-4) throw new Error(`gradient of ${p.name}: relative error ${err}`);
    worst = Math.max(worst, err);
    grads++;
  }
  return { worst, grads };
}

describe("qwen3_moe vs Hugging Face (f32 cpu)", () => {
  test("Hub layout (save_pretrained's model.safetensors)", async () => {
    const r = await run("model.safetensors");
    console.log(`qwen3_moe Hub layout: worst gradient relative error ${r.worst.toExponential(2)}`);
    expect(r.grads).toBe(68); // embed 1, head 2, 3 layers × 8, routers 2, dense MLP 3, 2 × 6 experts × 3
  });
  test("Transformers 5 fused layout (state_dict.safetensors)", async () => {
    const r = await run("state_dict.safetensors");
    expect(r.grads).toBe(68);
  });
});
