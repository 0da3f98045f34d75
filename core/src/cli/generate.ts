/**
 * `bun run generate --from <checkpoint|hf-dir|file.safetensors> --prompt TEXT [--max-new-tokens N]
 * [--temperature T] [--top-k K] [--top-p P] [--seed S] [--backend auto|webgpu|cpu]
 * [--tokenizer byte|gpt2|PATH] [--config FILE] [--no-cache] [--chat [--system TEXT] [--chat-template FILE|NAME]]`
 *
 * `--chat` (docs/fine-tuning.md "Generating with the chat template"): the prompt is one user turn
 * (after a `--system` turn when given) rendered with the chat template and its generation prompt,
 * as Transformers' `apply_chat_template(…, add_generation_prompt=True)` does: the template of the
 * tokenizer's tokenizer_config.json, the job's `data.chat_template`, or `--chat-template FILE` (or the name of one of tokenizer_config.json's named templates).
 *
 * Loads the model (cli/model-source.ts), encodes the prompt with its tokenizer and extends it with
 * models/generate.ts (KV cache unless --no-cache; greedy unless --temperature > 0). The text
 * (prompt + continuation) goes to stdout; the model, backend, tokenizer and timing lines go to
 * stderr. Backend choice as in training (`auto`: the faster, probed for one token per forward).
 *
 * Exit status: 0 on success, 2 for bad input (an option, a path that is no model, a damaged
 * checkpoint, a prompt outside the vocabulary) with one line naming it, 1 otherwise.
 */
import { generate } from "../models/generate.ts";
import { destroyBackend } from "../train/backend.ts";
import { parseOptions } from "./inference-args.ts";
import { UsageError, loadInferenceModel, reportCliError } from "./model-source.ts";
import { loadChatTemplate } from "../data/chat-template.ts";
import { renderPrompts } from "../data/chat-render.ts";
import type { ChatMessage } from "../data/chat-formats.ts";

/** Usage text. */
export const GENERATE_USAGE = `usage: bun run generate --from <checkpoint-dir|hf-dir|model.safetensors> --prompt TEXT [--max-new-tokens N (64)] [--temperature T (0 = greedy)] [--top-k K (0 = all)] [--top-p P (1 = all)] [--seed S (0)] [--backend auto|webgpu|cpu] [--tokenizer byte|gpt2|PATH] [--config FILE] [--no-cache] [--chat [--system TEXT] [--chat-template FILE|NAME]]`;

const SPECS = {
  "--from": { kind: "string" },
  "--prompt": { kind: "string" },
  "--max-new-tokens": { kind: "int", min: 0 },
  "--temperature": { kind: "number", min: 0 },
  "--top-k": { kind: "int", min: 0 },
  "--top-p": { kind: "number", min: 0, max: 1, exclusiveMin: true },
  "--seed": { kind: "int", min: 0 },
  "--backend": { kind: "enum", values: ["auto", "webgpu", "cpu"] },
  "--tokenizer": { kind: "string" },
  "--config": { kind: "string" },
  "--no-cache": { kind: "flag" },
  "--chat": { kind: "flag" },
  "--system": { kind: "string" },
  "--chat-template": { kind: "string" },
} as const;

/** Run with `argv` (without runtime and script); returns the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(GENERATE_USAGE);
    return 0;
  }
  try {
    const o = parseOptions(argv, SPECS, GENERATE_USAGE);
    if (o.from === undefined) throw new UsageError(`--from is required\n${GENERATE_USAGE}`);
    if (o.prompt === undefined) throw new UsageError(`--prompt is required\n${GENERATE_USAGE}`);
    if (o.chat !== true && (o.system !== undefined || o["chat-template"] !== undefined)) throw new UsageError(`${o.system !== undefined ? "--system" : "--chat-template"} applies with --chat only\n${GENERATE_USAGE}`);
    const src = await loadInferenceModel({ from: o.from as string, backend: (o.backend as "auto" | "webgpu" | "cpu") ?? "auto", tokenizer: o.tokenizer as string | undefined, config: o.config as string | undefined, probeTokens: 1 });
    const { model, tokenizer } = src;
    try {
      const c = src.config;
      console.error(`model      ${c.model_type}: ${c.num_hidden_layers} layers, hidden ${c.hidden_size}, vocab ${c.vocab_size} (${src.kind} ${o.from})`);
      console.error(`backend    ${src.backendLine}`);
      console.error(`tokenizer  ${src.tokenizerSource}`);
      for (const w of src.warnings) console.error(`warning: ${w}`);
      let text = o.prompt as string;
      if (o.chat === true) {
        const flag = o["chat-template"] as string | undefined;
        const file = flag ?? src.job?.data?.chat_template ?? null;
        // errors name the setting to change: the flag, else the key (the job's, or the one to add)
        const spec = loadChatTemplate(tokenizer.name, file, flag !== undefined || file === null ? "--chat-template" : "data.chat_template");
        const messages: ChatMessage[] = [...(o.system !== undefined ? [{ role: "system" as const, content: o.system as string }] : []), { role: "user", content: text }];
        [text] = await renderPrompts(spec, [{ messages, line: 1 }], "--prompt");
        console.error(`chat       template ${spec.origin}`);
      }
      const prompt = Array.from(tokenizer.encode(text!));
      if (prompt.length === 0) throw new UsageError("--prompt: encodes to no tokens (give at least one character)");
      const bad = prompt.find((t) => t >= c.vocab_size);
      if (bad !== undefined) throw new UsageError(`--prompt: token ${bad} is outside the model's vocabulary (vocab_size ${c.vocab_size})`);
      const maxNew = (o["max-new-tokens"] as number | undefined) ?? 64;
      const t0 = performance.now();
      const out = await generate(model, prompt, {
        maxNewTokens: maxNew,
        temperature: (o.temperature as number | undefined) ?? 0,
        topK: (o["top-k"] as number | undefined) ?? 0,
        topP: (o["top-p"] as number | undefined) ?? 1,
        seed: (o.seed as number | undefined) ?? 0,
        cache: o["no-cache"] !== true,
        // a padded vocabulary (vocab_size above the tokenizer's): ids the tokenizer cannot decode are never drawn
        vocabLimit: tokenizer.vocabSize,
        ...(tokenizer.documentSeparator.length === 1 && tokenizer.name !== "byte" ? { eosTokenId: tokenizer.documentSeparator[0] } : {}),
      });
      const s = (performance.now() - t0) / 1000;
      const n = out.length - prompt.length;
      process.stdout.write(tokenizer.decode(out) + "\n");
      console.error(`generated  ${n} tokens after a ${prompt.length}-token prompt in ${s.toFixed(2)} s (${(n / Math.max(s, 1e-9)).toFixed(1)} tokens/s, ${o["no-cache"] === true ? "no KV cache" : "KV cache"})`);
    } finally {
      model.destroy();
      destroyBackend(model.be);
    }
    return 0;
  } catch (e) {
    return reportCliError(e);
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
