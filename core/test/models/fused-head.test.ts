/**
 * Whole models with the fused LM head + loss (the default, tensor/ops/linear-cross-entropy.ts)
 * against the same models with `fusedHead = false` (logits materialised, then crossEntropy, and
 * logitsZLoss for the z-loss): the loss and every unit's gradient agree, for every model family
 * (the shapes of the Hugging Face fixtures, with the vocabulary changed to the prime 67), with
 * chunks and tiles that do not divide the 2 × 13 tokens or the vocabulary, masked labels (one
 * sequence wholly masked, so a chunk has no scored target), a tied embedding, the z-loss, and a
 * bf16 job. The fused path returns no logits unless asked; with returnLogits they equal the unfused
 * path's.
 *
 * Tolerances (cpu f32): everything before the head is the same computation; the head differs by
 * f32 roundings (linear-cross-entropy.test.ts): loss 1e-6 relative, each unit's gradient 1e-5 of
 * its largest entry. bf16 job: the gradients are rounded to bf16 (2⁻⁸ relative) → 1e-2. webgpu:
 * 1e-5 loss, 1e-4 gradients.
 */
import { describe, expect, test } from "bun:test";
import { CpuBackend, createBackend, type Backend, type DType } from "@zeromoe/kernels";
import { resolveModelConfig } from "../../src/config/resolve-model.ts";
import { createModel } from "../../src/engine/model-factory.ts";
import type { CausalDecoder } from "../../src/models/llama.ts";
import { backward } from "../../src/tensor/index.ts";
import { tokens } from "../tiny-models.ts";

const B = 2;
const S = 13;
const VOCAB = 67;

interface Variant {
  family: string;
  tied?: boolean;
  zLoss?: number;
  dtype?: DType;
}

function build(be: Backend, v: Variant): CausalDecoder {
  const raw = JSON.parse(require("node:fs").readFileSync(`core/test/fixtures/${v.family}/config.json`, "utf8")) as Record<string, unknown>;
  raw.vocab_size = VOCAB;
  if (v.tied) raw.tie_word_embeddings = true;
  const cfg = resolveModelConfig(raw, "config").config;
  const m = createModel(be, cfg, { seed: 21, dtype: v.dtype ?? "f32" });
  m.headTiles = { chunkTokens: 5, tileVocab: 17 };
  m.lmZLossCoef = v.zLoss ?? 0;
  return m;
}

/** Labels: sequence 0 scored except two positions, sequence 1 wholly masked except its last
 * (shifted away), so after the shift the chunk of rows 15..19 has no scored target. */
function inputs(): { ids: Int32Array; labels: Int32Array } {
  const ids = tokens(B * S, VOCAB, "fused-head");
  const labels = Int32Array.from(ids, (t, i) => (i === 3 || i === 8 || i >= S ? -100 : t));
  labels[2 * S - 1] = ids[2 * S - 1]!; // shifted away: no target
  return { ids, labels };
}

async function lossAndGrads(be: Backend, v: Variant, fused: boolean): Promise<{ loss: number; grads: Map<string, Float64Array>; logits: boolean }> {
  const m = build(be, v);
  m.fusedHead = fused;
  const { ids, labels } = inputs();
  const out = await m.forward({ inputIds: ids, labels, batch: B, seq: S });
  const hadLogits = out.logits !== null;
  const loss = await out.loss!.retain().item();
  await backward(out.loss!);
  out.loss!.dispose();
  const grads = new Map<string, Float64Array>();
  for (const u of m.units.units) {
    u.finalizeGrad();
    grads.set(u.name, Float64Array.from((await be.read({ buf: u.grad!, off: 0 }, u.numel)) as ArrayLike<number>, (x) => x));
  }
  m.destroy();
  return { loss, grads, logits: hadLogits };
}

function bf16ToF32(bits: number): number {
  const f = new Float32Array(new Uint32Array([bits << 16]).buffer);
  return f[0]!;
}

async function compare(be: Backend, v: Variant, lossTol: number, gradTol: number): Promise<void> {
  const f = await lossAndGrads(be, v, true);
  const u = await lossAndGrads(be, v, false);
  expect(f.logits).toBe(false);
  expect(u.logits).toBe(true);
  const label = `${v.family}${v.tied ? " tied" : ""}${v.zLoss ? ` z ${v.zLoss}` : ""}${v.dtype ? ` ${v.dtype}` : ""} on ${be.info.name}`;
  const le = Math.abs(f.loss - u.loss) / Math.abs(u.loss);
  expect(`${label}: loss rel err ${le.toExponential(2)} ≤ ${lossTol}`).toBe(`${label}: loss rel err ${le.toExponential(2)} ≤ ${le <= lossTol ? lossTol : "FAILED"}`);
  expect([...f.grads.keys()]).toEqual([...u.grads.keys()]);
  const dec = v.dtype === "bf16" ? bf16ToF32 : (x: number) => x;
  for (const [name, gu] of u.grads) {
    const gf = f.grads.get(name)!;
    let s = 0;
    let e = 0;
    for (let i = 0; i < gu.length; i++) {
      s = Math.max(s, Math.abs(dec(gu[i]!)));
      e = Math.max(e, Math.abs(dec(gf[i]!) - dec(gu[i]!)));
    }
    if (name === "embed" || name === "head") expect(s).toBeGreaterThan(0); // an expert without tokens has none
    const rel = s > 0 ? e / s : e;
    expect(`${label} ${name}: grad normwise err ${rel.toExponential(2)}`).toBe(`${label} ${name}: grad normwise err ${rel.toExponential(2)}${rel <= gradTol ? "" : ` > ${gradTol}`}`);
  }
}

const FAMILIES = ["llama", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "deepseek_v2"];

describe("fused LM head + loss in whole models: same loss and gradients as the unfused head", () => {
  for (const family of FAMILIES) test(`cpu f32, ${family}`, () => compare(new CpuBackend(), { family }, 1e-6, 1e-5));
  test("cpu f32, llama with tied embeddings and z-loss", () => compare(new CpuBackend(), { family: "llama", tied: true, zLoss: 1e-2 }, 1e-6, 1e-5));
  test("cpu f32, qwen3_moe with z-loss", () => compare(new CpuBackend(), { family: "qwen3_moe", zLoss: 3e-2 }, 1e-6, 1e-5));
  test("cpu, a bf16 job (llama, tied)", () => compare(new CpuBackend(), { family: "llama", tied: true, dtype: "bf16" }, 1e-6, 1e-2));

  test("returnLogits: the fused path also gives the logits, equal to the unfused path's", async () => {
    const be = new CpuBackend();
    const { ids, labels } = inputs();
    const read = async (fused: boolean) => {
      const m = build(be, { family: "mixtral" });
      m.fusedHead = fused;
      const out = await m.forward({ inputIds: ids, labels, batch: B, seq: S, returnLogits: true });
      const r = { logits: Float64Array.from((await out.logits!.toArray()) as Float32Array), loss: await out.loss!.item() };
      await backward(out.loss!);
      m.destroy();
      return r;
    };
    const a = await read(true);
    const b = await read(false);
    expect(a.logits.every((x, i) => Object.is(x, b.logits[i]))).toBe(true);
    expect(Math.abs(a.loss - b.loss) / b.loss).toBeLessThan(1e-6);
  });

  test("lastLogitsOnly: each sequence's last row of the full logits (generation's head)", async () => {
    const be = new CpuBackend();
    const m = build(be, { family: "qwen3_moe" });
    const { ids, labels } = inputs();
    const { noGrad } = await import("../../src/tensor/index.ts");
    const full = await noGrad(async () => {
      const o = await m.forward({ inputIds: ids, batch: B, seq: S });
      const a = Float64Array.from((await o.logits!.toArray()) as Float32Array);
      o.logits!.dispose();
      o.auxLoss?.dispose();
      return a;
    });
    const last = await noGrad(async () => {
      const o = await m.forward({ inputIds: ids, batch: B, seq: S, lastLogitsOnly: true });
      expect(o.logits!.shape).toEqual([B, 1, VOCAB]);
      const a = Float64Array.from((await o.logits!.toArray()) as Float32Array);
      o.logits!.dispose();
      o.auxLoss?.dispose();
      return a;
    });
    for (let b = 0; b < B; b++) for (let j = 0; j < VOCAB; j++) expect(Object.is(last[b * VOCAB + j], full[(b * S + S - 1) * VOCAB + j])).toBe(true);
    await expect(m.forward({ inputIds: ids, labels, batch: B, seq: S, lastLogitsOnly: true })).rejects.toThrow(/lastLogitsOnly is for a forward without labels/);
    m.destroy();
  });

  test("auto-selected backend (webgpu where an adapter exists): llama tied + z-loss, mixtral", async () => {
    const { backend: be, reason } = await createBackend("auto", { choose: "first-adapter" });
    console.log(`fused-head on ${be.info.name}: ${reason}`);
    await compare(be, { family: "llama", tied: true, zLoss: 1e-2 }, 1e-5, 1e-4);
    await compare(be, { family: "mixtral" }, 1e-5, 1e-4);
    if (be.info.name !== "webgpu") return;
    // bindings of 4 KiB: the embedding, the head unit, the logits of the unfused path are segmented
    const { backend: low } = await createBackend("webgpu", { maxBindingBytes: 4096 });
    await compare(low, { family: "llama", tied: true, zLoss: 1e-2 }, 1e-5, 1e-4);
    (low as { destroy?: () => void }).destroy?.();
  }, 300_000);
});
