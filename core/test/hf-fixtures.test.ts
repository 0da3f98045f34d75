/**
 * ZeroMoE's Llama and Mixtral against Hugging Face Transformers 5.17 (fixtures in core/test/fixtures,
 * see its README): logits and loss to 1e-4 relative, every parameter gradient to 1e-3, on the f32
 * cpu backend; and Transformers 5's fused Mixtral state dict loads to the same model.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend } from "@zeromoe/kernels";
import { createBackend } from "@zeromoe/kernels";
import { loadStateDict as readSafetensors } from "../src/checkpoint/hf-load.ts";
import { llamaConfig, mixtralConfig } from "../src/models/config.ts";
import { LlamaForCausalLM, type CausalDecoder } from "../src/models/llama.ts";
import { MixtralForCausalLM } from "../src/models/mixtral.ts";
import { readGrad, type StateDict } from "../src/nn/state-dict.ts";
import { backward } from "../src/tensor/index.ts";
import { maxRelativeError as relErr } from "../src/testing/relative-error.ts";

const dir = "core/test/fixtures";

async function fixture(name: string) {
  const config = JSON.parse(await Bun.file(`${dir}/${name}/config.json`).text());
  const weights = readSafetensors(`${dir}/${name}/model.safetensors`) as unknown as StateDict;
  const expected = readSafetensors(`${dir}/${name}/expected.safetensors`);
  const inputs = JSON.parse(await Bun.file(`${dir}/${name}/inputs.json`).text()) as { input_ids: number[][]; labels: number[][] };
  return { config, weights, expected, inputs };
}

async function compare(model: CausalDecoder, f: Awaited<ReturnType<typeof fixture>>): Promise<void> {
  const B = f.inputs.input_ids.length;
  const S = f.inputs.input_ids[0]!.length;
  const out = await model.forward({ inputIds: f.inputs.input_ids.flat(), labels: f.inputs.labels.flat(), batch: B, seq: S, returnLogits: true });
  const logits = await out.logits!.toArray();
  const loss = await out.loss!.item();
  expect(relErr(logits, f.expected.get("logits")!.data)).toBeLessThan(1e-4);
  const refLoss = f.expected.get("loss")!.data[0]!;
  expect(Math.abs(loss - refLoss) / Math.abs(refLoss)).toBeLessThan(1e-4);
  await backward(out.loss!);
  let checked = 0;
  for (const p of model.parameters()) {
    const ref = f.expected.get(`grad.${p.name}`);
    if (!ref) throw new Error(`fixture has no grad.${p.name}`);
    const g = await readGrad(p);
    const err = relErr(g!.data, ref.data);
    if (err > 1e-3) throw new Error(`gradient of ${p.name}: relative error ${err}`);
    checked++;
  }
  expect(checked).toBe(model.parameters().length);
}

describe("Hugging Face fixtures (f32 cpu backend)", () => {
  test("llama: logits, loss, all gradients", async () => {
    const f = await fixture("llama");
    const be = new CpuBackend();
    const model = new LlamaForCausalLM(be, llamaConfig(f.config));
    model.loadStateDict(f.weights);
    await compare(model, f);
  });

  test("mixtral: logits, loss (with aux), aux loss, all gradients", async () => {
    const f = await fixture("mixtral");
    const be = new CpuBackend();
    const model = new MixtralForCausalLM(be, mixtralConfig(f.config));
    model.loadStateDict(f.weights);
    // aux loss alone, read before backward frees it
    const B = 2;
    const S = 7;
    const out = await model.forward({ inputIds: f.inputs.input_ids.flat(), labels: f.inputs.labels.flat(), batch: B, seq: S });
    const aux = await model.lastAuxLoss!.item();
    const refAux = f.expected.get("aux_loss")!.data[0]!;
    expect(Math.abs(aux - refAux) / refAux).toBeLessThan(1e-4);
    await backward(out.loss!);
    model.zeroGrad();
    await compare(model, f);
  });

  test("llama and mixtral on the auto-selected backend (webgpu where an adapter exists)", async () => {
    const { backend: be, reason } = await createBackend("auto", { choose: "first-adapter" });
    console.log(`hf-fixtures on ${be.info.name}: ${reason}`);
    const fl = await fixture("llama");
    const llama = new LlamaForCausalLM(be, llamaConfig(fl.config));
    llama.loadStateDict(fl.weights);
    await compare(llama, fl);
    const fm = await fixture("mixtral");
    const mixtral = new MixtralForCausalLM(be, mixtralConfig(fm.config));
    mixtral.loadStateDict(fm.weights);
    await compare(mixtral, fm);
    expect(be.memory().current.activation).toBe(0);
    llama.destroy();
    mixtral.destroy();
    // bf16 units (f32 working copies, casts on the device) with activation checkpointing.
    const m16 = new MixtralForCausalLM(be, mixtralConfig(fm.config), { dtype: "bf16" });
    m16.loadStateDict(fm.weights);
    m16.gradientCheckpointing = true;
    const out = await m16.forward({ inputIds: fm.inputs.input_ids.flat(), labels: fm.inputs.labels.flat(), batch: 2, seq: 7 });
    const ref = fm.expected.get("loss")!.data[0]!;
    expect(Math.abs((await out.loss!.item()) - ref) / ref).toBeLessThan(1e-2);
    await backward(out.loss!);
    expect(m16.units.unit("layers.1").grad!.dtype).toBe("bf16");
    expect(be.memory().current.activation).toBe(0);
    expect(be.memory().current.gathered).toBe(0);
    m16.destroy();
  }, 300_000); // hang guard: on lavapipe under load this takes well over 5 s

  test("mixtral with bf16 parameter units, loaded from the f32 checkpoint: close to HF", async () => {
    const f = await fixture("mixtral");
    const be = new CpuBackend();
    const m = new MixtralForCausalLM(be, mixtralConfig(f.config), { dtype: "bf16" });
    m.loadStateDict(f.weights);
    const out = await m.forward({ inputIds: f.inputs.input_ids.flat(), labels: f.inputs.labels.flat(), batch: 2, seq: 7, returnLogits: true });
    const loss = await out.loss!.item();
    const ref = f.expected.get("loss")!.data[0]!;
    expect(Math.abs(loss - ref) / ref).toBeLessThan(1e-2);
    expect(relErr(await out.logits!.toArray(), f.expected.get("logits")!.data)).toBeLessThan(3e-2);
    await backward(out.loss!);
  });

  test("mixtral: Transformers 5 fused state dict loads to the same parameters, and round-trips", async () => {
    const f = await fixture("mixtral");
    const fused = readSafetensors(`${dir}/mixtral/state_dict.safetensors`) as unknown as StateDict;
    const be = new CpuBackend();
    const a = new MixtralForCausalLM(be, mixtralConfig(f.config));
    a.loadStateDict(f.weights);
    const b = new MixtralForCausalLM(be, mixtralConfig(f.config), { seed: 5 });
    b.loadStateDict(fused);
    const sa = await a.stateDict();
    const sb = await b.stateDict();
    expect([...sa.keys()].sort()).toEqual([...f.weights.keys()].sort());
    for (const [k, v] of sa) expect(Array.from(sb.get(k)!.data)).toEqual(Array.from(v.data));
    const fusedOut = await a.stateDict({ layout: "fused" });
    expect([...fusedOut.keys()].sort()).toEqual([...fused.keys()].sort());
    for (const [k, v] of fused) {
      expect(fusedOut.get(k)!.shape).toEqual(v.shape);
      expect(Array.from(fusedOut.get(k)!.data)).toEqual(Array.from(v.data));
    }
  });
});
