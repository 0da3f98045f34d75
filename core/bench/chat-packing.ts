/**
 * Packed vs padded chat rows (docs/fine-tuning.md "Packing"): the same synthetic chat dataset laid
 * into rows both ways (core/src/data/chat-rows.ts) and run through a llama forward + backward on a
 * backend, one pass over every row; prints per layout the rows, the computed tokens (rows ·
 * seq_len), the pad fraction, the scored labels and the rates that matter: scored labels per
 * second and conversations per second (a padded row computes its pad; a packed row runs RoPE and
 * attention once per segment).
 *
 *   bun run bench chat-packing [--conversations 64] [--seq-len 1024] [--micro 2] [--hidden 128]
 *     [--layers 2] [--backend cpu|webgpu] [--seed 1]
 *
 * Data: messages records of a system turn, then 1–2 exchanges of a user turn of 2–8 random words
 * and an assistant turn of 2–30 (seeded), rendered with a ChatML template (Qwen-style
 * `<|im_start|>` turns) and the byte tokenizer, masked to the assistant turns. Model: vocabulary
 * 256 (bytes), hidden/64 heads (at least 1), intermediate 2.7 × hidden. On webgpu a first pass
 * compiles the kernels and is not timed.
 */
import { parseArgs } from "node:util";
import { createBackend } from "@zeromoe/kernels";
import { llamaConfig } from "../src/models/config.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { backward } from "../src/tensor/index.ts";
import { assistantPieces } from "../src/data/chat-masking.ts";
import { chatRows, tokenizePieces, type ChatRows } from "../src/data/chat-rows.ts";
import { CompiledChatTemplate } from "../src/data/chat-template.ts";
import type { ChatMessage } from "../src/data/chat-formats.ts";
import { ByteTokenizer } from "../src/data/tokenizer.ts";
import { Rng } from "../src/data/prng.ts";

/** Usage text (bench --help). */
export const USAGE = "usage: bun run bench chat-packing [--conversations 64] [--seq-len 1024] [--micro 2] [--hidden 128] [--layers 2] [--backend cpu|webgpu] [--seed 1]";

const CHATML = "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const WORDS = ["the", "model", "packs", "rows", "of", "chat", "data", "tokens", "attention", "segment", "loss", "masked", "answer", "question", "short", "longer"];

function conversations(n: number, rng: Rng): ChatMessage[][] {
  const text = (k: number) => Array.from({ length: k }, () => WORDS[rng.nextInt(WORDS.length)]).join(" ");
  return Array.from({ length: n }, () => {
    const m: ChatMessage[] = [{ role: "system", content: "Answer briefly." }];
    const turns = 1 + rng.nextInt(2);
    for (let t = 0; t < turns; t++) m.push({ role: "user", content: text(2 + rng.nextInt(7)) }, { role: "assistant", content: text(2 + rng.nextInt(29)) });
    return m;
  });
}

/** Entry (bench.ts). */
export async function main(args: string[]): Promise<void> {
  const { values: a } = parseArgs({
    args,
    options: {
      conversations: { type: "string", default: "64" },
      "seq-len": { type: "string", default: "1024" },
      micro: { type: "string", default: "2" },
      hidden: { type: "string", default: "128" },
      layers: { type: "string", default: "2" },
      backend: { type: "string", default: "cpu" },
      seed: { type: "string", default: "1" },
    },
  });
  const int = (k: string, v: string | undefined) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`chat-packing: --${k} must be a positive integer, got ${JSON.stringify(v)}`);
    return n;
  };
  const N = int("conversations", a.conversations);
  const S = int("seq-len", a["seq-len"]);
  const micro = int("micro", a.micro);
  const H = int("hidden", a.hidden);
  const L = int("layers", a.layers);
  if (a.backend !== "cpu" && a.backend !== "webgpu") throw new Error(`chat-packing: --backend must be cpu or webgpu, got ${JSON.stringify(a.backend)}`);
  const tok = new ByteTokenizer();
  const t = new CompiledChatTemplate({ source: CHATML, origin: "ChatML", specials: { bos_token: "", eos_token: "<|im_end|>", pad_token: "", unk_token: "" } });
  const examples = conversations(N, new Rng(int("seed", a.seed))).map((m, i) => tokenizePieces(assistantPieces(m, (x, g) => t.render(x, g, `#${i}`), "<|im_end|>", false, `#${i}`), tok));
  const { backend: be, reason } = await createBackend(a.backend);
  const heads = Math.max(1, Math.floor(H / 64));
  const cfg = llamaConfig({ vocab_size: 256, hidden_size: H, intermediate_size: Math.round(2.7 * H), num_hidden_layers: L, num_attention_heads: heads, num_key_value_heads: heads, max_position_embeddings: S });
  const model = new LlamaForCausalLM(be, cfg, { seed: 1 });
  console.log(`chat-packing: ${N} conversations (${examples.reduce((s, e) => s + e.ids.length, 0)} tokens), seq_len ${S}, micro ${micro}, llama hidden ${H} × ${L} layers; ${reason}`);
  for (const packing of [false, true]) {
    const rows: ChatRows = chatRows(examples, S, packing, 0);
    const run = async () => {
      for (let r = 0; r < rows.rows; r += micro) {
        const n = Math.min(micro, rows.rows - r);
        const sl = (x: Int32Array) => x.subarray(r * S, (r + n) * S);
        model.zeroGrad();
        const out = await model.forward({ inputIds: sl(rows.ids), labels: sl(rows.labels), batch: n, seq: S, ...(rows.segmentIds ? { segmentIds: sl(rows.segmentIds) } : {}) });
        await backward(out.loss!);
      }
      await be.flush();
    };
    if (a.backend === "webgpu") await run(); // kernel compilation
    const t0 = performance.now();
    await run();
    const s = (performance.now() - t0) / 1000;
    const computed = rows.rows * S;
    const real = examples.reduce((acc, e) => acc + Math.min(e.ids.length, S), 0);
    console.log(
      `${packing ? "packed" : "padded"}  rows ${rows.rows} | tokens computed ${computed} (pad ${(100 * (1 - real / computed)).toFixed(1)}%) | scored ${rows.scored} | ${s.toFixed(2)} s | ` +
        `${(computed / s).toFixed(0)} tokens/s computed, ${(rows.scored / s).toFixed(0)} scored labels/s, ${(rows.examples / s).toFixed(1)} conversations/s${rows.truncated ? ` | ${rows.truncated} cut to seq_len` : ""}`,
    );
  }
  model.destroy();
}

if (import.meta.main) await main(process.argv.slice(2));
