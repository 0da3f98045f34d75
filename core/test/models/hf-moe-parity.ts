/**
 * Parity of a sparse family against its Hugging Face fixture (core/test/fixtures/<family>, made by
 * scripts/hf-fixtures/make_moe_fixtures.py with Transformers 5.17): logits, loss (CE + coef·aux),
 * aux loss, each MoE layer's router logits (ours through a wrapping router vs the fixture's) and
 * every gradient, on a given backend. Errors are max |Δ| relative to the reference tensor's max |·|.
 */
import type { Backend } from "@zeromoe/kernels";
import { loadStateDict as readSafetensors } from "../../src/checkpoint/hf-load.ts";
import { resolveModelConfig } from "../../src/config/resolve-model.ts";
import type { ModelConfig } from "../../src/config/types.ts";
import { createModel } from "../../src/engine/model-factory.ts";
import type { GatingRequest, MoERouter, RoutingRequest } from "../../src/nn/moe/router.ts";
import { readGrad, type StateDict } from "../../src/nn/state-dict.ts";
import { backward } from "../../src/tensor/index.ts";
import { maxRelativeError as relErr } from "../../src/testing/relative-error.ts";

/** Worst errors of one parity run. */
export interface ParityResult {
  config: ModelConfig;
  logits: number;
  loss: number;
  aux: number;
  router: number;
  /** Worst gradient error and the number of parameters compared. */
  grad: number;
  grads: number;
  /** MoE layers whose router logits were seen. */
  moeLayers: number[];
}

/**
 * Run fixture `dir` with weights file `weightsFile` on `be`; throws when any gradient's error
 * exceeds `gradTol` (naming the parameter).
 */
export async function hfParity(dir: string, weightsFile: string, be: Backend, gradTol = 1e-4): Promise<ParityResult> {
  const raw = JSON.parse(await Bun.file(`${dir}/config.json`).text());
  const cfg = resolveModelConfig(raw, "config").config;
  const expected = readSafetensors(`${dir}/expected.safetensors`);
  const inputs = JSON.parse(await Bun.file(`${dir}/inputs.json`).text()) as { input_ids: number[][]; labels: number[][] };
  const model = createModel(be, cfg, {});
  model.loadStateDict(readSafetensors(`${dir}/${weightsFile}`) as unknown as StateDict);
  const inner = model.moe!.router;
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
  model.moe!.router = spy;
  const B = inputs.input_ids.length;
  const S = inputs.input_ids[0]!.length;
  const out = await model.forward({ inputIds: inputs.input_ids.flat(), labels: inputs.labels.flat(), batch: B, seq: S, returnLogits: true });
  const ref = (k: string) => {
    const t = expected.get(k);
    if (!t) throw new Error(`fixture ${dir} has no ${k}`);
    return t.data;
  };
  const logits = relErr(await out.logits!.toArray(), ref("logits"));
  const loss = relErr([await out.loss!.item()], ref("loss"));
  // families without a Hugging Face aux loss (DeepSeek) have none in the fixture
  const aux = expected.has("aux_loss") ? relErr([await out.auxLoss!.item()], ref("aux_loss")) : 0;
  let router = 0;
  for (const [l, rl] of logitsOf) {
    router = Math.max(router, relErr(rl, ref(`router_logits.${l}`)));
    if (expected.has(`hf_router_logits.${l}`)) router = Math.max(router, relErr(rl, ref(`hf_router_logits.${l}`)));
  }
  await backward(out.loss!);
  let grad = 0;
  let grads = 0;
  for (const p of model.parameters()) {
    const err = relErr((await readGrad(p))!.data, ref(`grad.${p.name}`));
    if (err > gradTol) throw new Error(`gradient of ${p.name}: relative error ${err}`);
    grad = Math.max(grad, err);
    grads++;
  }
  model.destroy();
  return { config: cfg, logits, loss, aux, router, grad, grads, moeLayers: [...logitsOf.keys()].sort((a, b) => a - b) };
}
