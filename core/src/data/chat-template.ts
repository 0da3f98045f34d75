/**
 * Chat templates as Transformers renders them (`tokenizer.apply_chat_template`): the model
 * directory's `tokenizer_config.json` `chat_template` (a Jinja string, or a list of named templates
 * of which `default` is used), or a template file named by `data.chat_template` / `generate
 * --chat-template`; rendered by npm `@huggingface/jinja` (pinned in core/package.json), the Jinja
 * subset the Hub's templates are written in, with Transformers' settings (trim_blocks and
 * lstrip_blocks on, `{% generation %}` tags ignored, `raise_exception`) and its variables:
 * `messages`, `add_generation_prompt`, and the special tokens of tokenizer_config.json
 * (`bos_token`, `eos_token`, `pad_token`, `unk_token` as strings; an AddedToken object's `content`).
 *
 * A template is untrusted code: {@link renderChatTemplate} bounds its output
 * ({@link MAX_RENDER_CHARS}) and its `range()` ({@link MAX_TEMPLATE_RANGE}); a template that runs
 * long in another way is stopped by the worker watchdog of chat-render.ts.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { Environment, Interpreter, Template } from "@huggingface/jinja";
import { DataError } from "./sources.ts";
import { tokenizerJsonPath } from "./hf-tokenizer.ts";
import type { ChatMessage } from "./chat-formats.ts";
import { pathForMessage, quoteUntrusted, QUOTE_MESSAGE_CHARS } from "../config/quote-untrusted.ts";

/** Largest template file / tokenizer_config.json read, bytes. */
export const MAX_TEMPLATE_FILE_BYTES = 4 << 20;
/** Longest rendered conversation, characters. */
export const MAX_RENDER_CHARS = 16 << 20;
/** Most elements one `range()` call of a template may make. */
export const MAX_TEMPLATE_RANGE = 1 << 16;

/** A chat template with the special tokens it is rendered with. */
export interface ChatTemplateSpec {
  /** Jinja source. */
  source: string;
  /** Where it came from, for messages. */
  origin: string;
  /** Special-token strings passed to the template (bos_token, eos_token, pad_token, unk_token); "" when not set. */
  specials: Record<"bos_token" | "eos_token" | "pad_token" | "unk_token", string>;
}

function readSmallText(file: string, what: string): string {
  let st;
  try {
    st = statSync(file);
  } catch {
    throw new DataError(`${what}: file not found: ${pathForMessage(file)}`);
  }
  if (!st.isFile()) throw new DataError(`${what}: ${pathForMessage(file)} is not a regular file`);
  if (st.size > MAX_TEMPLATE_FILE_BYTES) throw new DataError(`${what}: ${pathForMessage(file)} is ${st.size} bytes, over the ${MAX_TEMPLATE_FILE_BYTES}-byte limit`);
  return readFileSync(file, "utf8");
}

/** A special token of tokenizer_config.json as its string: a string, or an AddedToken object's `content`; "" otherwise. */
function specialString(v: unknown): string {
  if (typeof v === "string") return v;
  if (v !== null && typeof v === "object" && typeof (v as { content?: unknown }).content === "string") return (v as { content: string }).content;
  return "";
}

/** The tokenizer_config.json beside a tokenizer (a directory, or a tokenizer.json file), or null. */
export function tokenizerConfigPath(tokenizer: string): string | null {
  const json = tokenizerJsonPath(tokenizer);
  if (json === null) return null;
  const f = join(dirname(json), "tokenizer_config.json");
  return existsSync(f) ? f : null;
}

/**
 * The chat template of a job: `templateFile` when given — a Jinja file, or the name of one of
 * tokenizer_config.json's named templates when its `chat_template` is a list — (its special tokens
 * still come from the tokenizer's tokenizer_config.json when there is one), else
 * tokenizer_config.json's `chat_template` beside `tokenizer` ("byte" / "gpt2" have none).
 * @param key the setting that names `templateFile`, for messages ("data.chat_template", or generate's "--chat-template")
 * @throws DataError naming the file: no template, unreadable or oversized files, a template list without "default".
 */
export function loadChatTemplate(tokenizer: string, templateFile: string | null, key = "data.chat_template"): ChatTemplateSpec {
  const cfgFile = tokenizer === "byte" || tokenizer === "gpt2" ? null : tokenizerConfigPath(tokenizer);
  let cfg: Record<string, unknown> = {};
  if (cfgFile !== null) {
    try {
      const v = JSON.parse(readSmallText(cfgFile, "tokenizer config")) as unknown;
      if (v !== null && typeof v === "object" && !Array.isArray(v)) cfg = v as Record<string, unknown>;
      else throw new DataError(`${pathForMessage(cfgFile)}: expected a JSON object`);
    } catch (e) {
      if (e instanceof DataError) throw e;
      throw new DataError(`${pathForMessage(cfgFile)}: not valid JSON (${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)})`);
    }
  }
  const specials = {
    bos_token: specialString(cfg.bos_token),
    eos_token: specialString(cfg.eos_token),
    pad_token: specialString(cfg.pad_token),
    unk_token: specialString(cfg.unk_token),
  };
  if (templateFile !== null) {
    // a name of tokenizer_config.json's list of named templates ("default", "tool_use", …)
    const t = cfg.chat_template;
    const names = Array.isArray(t) ? t.filter((x) => x !== null && typeof x === "object" && typeof (x as { name?: unknown }).name === "string" && typeof (x as { template?: unknown }).template === "string") as { name: string; template: string }[] : [];
    if (!existsSync(templateFile)) {
      const named = names.find((x) => x.name === templateFile);
      if (named) return { source: named.template, origin: `${configName(cfgFile)} chat_template "${named.name}"`, specials };
      if (names.length > 0) throw new DataError(`${key}: ${quoteUntrusted(templateFile)} is neither a file nor one of the named templates of ${pathForMessage(cfgFile!)} (${names.map((x) => JSON.stringify(x.name)).join(", ")})`);
    }
    if (!existsSync(templateFile) && !/[./\\]/.test(templateFile)) {
      // a bare word: meant as a template name, but the tokenizer has no list of named templates
      throw new DataError(`${key}: ${quoteUntrusted(templateFile)} is neither a file nor a named template (${cfgFile === null ? `the tokenizer ${quoteUntrusted(tokenizer)} has no tokenizer_config.json` : `the chat_template of ${pathForMessage(cfgFile)} is not a list of named templates`})`);
    }
    return { source: readSmallText(templateFile, key), origin: templateFile, specials };
  }
  const where = cfgFile === null ? `the tokenizer ${quoteUntrusted(tokenizer)} has no tokenizer_config.json` : `${pathForMessage(cfgFile)} has no "chat_template"`;
  const t = cfg.chat_template;
  if (typeof t === "string" && t !== "") return { source: t, origin: `${cfgFile} chat_template`, specials };
  if (Array.isArray(t)) {
    const d = t.find((x) => x !== null && typeof x === "object" && (x as { name?: unknown }).name === "default") as { template?: unknown } | undefined;
    if (d && typeof d.template === "string") return { source: d.template, origin: `${cfgFile} chat_template "default"`, specials };
    throw new DataError(`${pathForMessage(cfgFile!)}: chat_template is a list without a "default" template; name a template file in ${key}`);
  }
  const jinja = cfgFile === null ? null : join(dirname(cfgFile), "chat_template.jinja");
  if (jinja !== null && existsSync(jinja)) return { source: readSmallText(jinja, "chat_template.jinja"), origin: jinja, specials };
  throw new DataError(`${key === "--chat-template" ? "--chat" : "chat data"} needs a chat template: ${where}; name a Jinja template file in ${key}`);
}

function configName(f: string | null): string {
  return f ?? "tokenizer_config.json";
}

/** A parsed template (parse once, render many). */
export class CompiledChatTemplate {
  private readonly t: Template;
  constructor(readonly spec: ChatTemplateSpec) {
    try {
      this.t = new Template(spec.source);
    } catch (e) {
      throw new DataError(`chat template ${quoteUntrusted(spec.origin)}: does not parse: ${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)}`);
    }
  }

  /**
   * Renders `messages` as Transformers' `apply_chat_template(messages, tokenize=False,
   * add_generation_prompt=…)` does.
   * @throws DataError on a template error (its `raise_exception` message included), an output over
   *   {@link MAX_RENDER_CHARS} or a `range()` over {@link MAX_TEMPLATE_RANGE}; `where` names the record.
   */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean, where: string): string {
    let out: unknown;
    try {
      // Template.render's globals, with range() bounded
      const env = new Environment();
      const vars: Record<string, unknown> = {
        false: false, true: true, none: null, False: false, True: true, None: null,
        raise_exception: (msg: unknown) => {
          throw new Error(String(msg));
        },
        range: boundedRange,
        strftime_now: strftimeNow,
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
        add_generation_prompt: addGenerationPrompt,
        ...this.spec.specials,
      };
      for (const [k, v] of Object.entries(vars)) env.set(k, v);
      out = new Interpreter(env).run(this.t.parsed).value;
    } catch (e) {
      throw new DataError(`${where}: chat template ${quoteUntrusted(this.spec.origin)} failed: ${quoteUntrusted((e as Error).message, QUOTE_MESSAGE_CHARS)}`);
    }
    if (typeof out !== "string") throw new DataError(`${where}: chat template ${quoteUntrusted(this.spec.origin)} rendered no string`);
    if (out.length > MAX_RENDER_CHARS) throw new DataError(`${where}: chat template ${quoteUntrusted(this.spec.origin)} rendered ${out.length} characters, over the ${MAX_RENDER_CHARS} limit`);
    return out;
  }
}

/** Python's range() with at most {@link MAX_TEMPLATE_RANGE} elements. */
function boundedRange(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (step === 0) throw new Error("range() step must not be zero");
  const n = Math.max(0, Math.ceil((stop - start) / step));
  if (!(n <= MAX_TEMPLATE_RANGE)) throw new Error(`range() of ${n} elements is over the limit of ${MAX_TEMPLATE_RANGE}`);
  return Array.from({ length: n }, (_, i) => start + i * step);
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/** Transformers' `strftime_now(format)`: the local time now in Python strftime codes (%d %m %Y %y %b %B %a %A %H %M %S %j %%; others left as written). */
function strftimeNow(format: unknown): string {
  const d = new Date();
  const p2 = (n: number) => String(n).padStart(2, "0");
  const day = Math.floor((d.getTime() - new Date(d.getFullYear(), 0, 1).getTime()) / 86_400_000) + 1;
  const codes: Record<string, string> = {
    d: p2(d.getDate()), m: p2(d.getMonth() + 1), Y: String(d.getFullYear()), y: p2(d.getFullYear() % 100),
    b: MONTHS[d.getMonth()]!.slice(0, 3), B: MONTHS[d.getMonth()]!, a: DAYS[d.getDay()]!.slice(0, 3), A: DAYS[d.getDay()]!,
    H: p2(d.getHours()), M: p2(d.getMinutes()), S: p2(d.getSeconds()), j: String(day).padStart(3, "0"), "%": "%",
  };
  return String(format).replace(/%(.)/g, (m, c: string) => codes[c] ?? m);
}

/** Renders `messages` with `spec` in-process (one call; generate's prompt). See {@link CompiledChatTemplate.render}. */
export function renderChatTemplate(spec: ChatTemplateSpec, messages: readonly ChatMessage[], addGenerationPrompt: boolean, where = "chat"): string {
  return new CompiledChatTemplate(spec).render(messages, addGenerationPrompt, where);
}
