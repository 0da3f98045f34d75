/**
 * The files besides the weights and config.json that a Hugging Face model directory carries and
 * that Transformers' `save_pretrained` of a model with its tokenizer writes: the tokenizer
 * (tokenizer.json, tokenizer_config.json, special_tokens_map.json, added_tokens.json, the
 * sentencepiece tokenizer.model or BPE vocab.json + merges.txt, chat_template.jinja) and
 * generation_config.json. An export (save16bitModel, zero-to-fp32 to a directory) copies them from
 * where the job got its model and tokenizer — `model.from_pretrained` and the directory of a
 * `data.tokenizer` tokenizer.json — so the exported directory loads with AutoTokenizer and
 * generates with the model's own defaults. Only regular files of at most {@link MAX_SIDE_FILE_BYTES}
 * are copied (temporary file, then rename); a missing source is skipped; the first source that
 * holds a file wins; nothing already written by the export (config.json, weights) is replaced.
 */
import { copyFileSync, existsSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { JobConfig } from "../config/types.ts";

/** The file names copied (Transformers' tokenizer and generation-config files). */
export const HUB_SIDE_FILES: readonly string[] = [
  "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
  "tokenizer.model", "vocab.json", "merges.txt", "chat_template.jinja", "generation_config.json",
];

/** Largest side file copied (bytes): above any real tokenizer (Llama 3's tokenizer.json is 9 MB). */
export const MAX_SIDE_FILE_BYTES = 256 << 20;

/** Directories a job's side files come from, in priority order: `model.from_pretrained`, then the
 * directory of `data.tokenizer` when it names a tokenizer.json or a directory holding one. */
export function sideFileSources(config: Pick<JobConfig, "model" | "data">): string[] {
  const out: string[] = [];
  const fp = (config.model as { from_pretrained?: string }).from_pretrained;
  if (typeof fp === "string") out.push(resolve(fp));
  const tok = config.data?.tokenizer;
  if (typeof tok === "string" && tok !== "byte" && tok !== "gpt2" && existsSync(tok)) {
    const d = statSync(tok).isDirectory() ? resolve(tok) : dirname(resolve(tok));
    if (!out.includes(d)) out.push(d);
  }
  return out;
}

/**
 * Copy {@link HUB_SIDE_FILES} from `sources` (first holder wins) into `outDir`, skipping names
 * already present in `outDir`.
 * @returns the names copied
 * @throws fs errors while copying (the temporary file is removed)
 */
export function copyHubSideFiles(outDir: string, sources: readonly string[]): string[] {
  const copied: string[] = [];
  for (const name of HUB_SIDE_FILES) {
    const dst = join(outDir, name);
    if (existsSync(dst)) continue;
    for (const src of sources) {
      const from = join(src, name);
      if (resolve(from) === resolve(dst)) break;
      const st = statSync(from, { throwIfNoEntry: false });
      if (st === undefined || !st.isFile() || st.size > MAX_SIDE_FILE_BYTES) continue;
      const tmp = `${dst}.tmp-${process.pid}`;
      try {
        copyFileSync(from, tmp);
        renameSync(tmp, dst);
      } catch (e) {
        rmSync(tmp, { force: true });
        throw e;
      }
      copied.push(name);
      break;
    }
  }
  return copied;
}
