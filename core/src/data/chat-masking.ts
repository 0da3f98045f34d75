/**
 * Which characters of a rendered conversation the loss trains on (docs/fine-tuning.md "Masking"):
 * the assistant turns, found by rendering the conversation prefix by prefix, the approach of
 * Transformers' chat-template docs for templates without `{% generation %}` markers.
 *
 * For assistant message i: its start is the length of the render of messages [0, i) with the
 * generation prompt (which must be a prefix of the whole conversation's render); its end is where
 * the render of messages [0, i] (no generation prompt) stops agreeing with the whole render. A
 * template that renders a turn differently when it is last (Qwen3's empty think block, say) ends
 * the agreement at the start; then the end is found as the message's content in the whole render
 * (after the start, before the next turn's start) followed by the eos token when it is there.
 * The span ends right after the last eos token in it when the tokenizer names one (what a template
 * writes after the end-of-turn token, Qwen's newline, is not the assistant's), as the
 * `{% generation %}` markers of Transformers' templates place it. The span thus covers the
 * assistant's text and its end-of-turn token, not the role header.
 */
import { DataError } from "./sources.ts";
import type { ChatMessage } from "./chat-formats.ts";

/** A piece of a rendered conversation: `train` true for text the loss is computed on. */
export interface ChatPiece {
  text: string;
  train: boolean;
}

/** Renders messages ([0, n) of a conversation) with or without the generation prompt. */
export type RenderFn = (messages: readonly ChatMessage[], addGenerationPrompt: boolean) => string;

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * The conversation rendered as pieces, trained on the assistant turns (or everything with
 * `trainOnPrompt`). The pieces joined are exactly the whole render.
 * @param eos the eos token string ("" when none), kept in an assistant span when it follows the content.
 * @throws DataError naming `where` when an assistant turn cannot be located (a template whose
 *   prefixes are not prefixes of the whole render).
 */
export function assistantPieces(messages: readonly ChatMessage[], render: RenderFn, eos: string, trainOnPrompt: boolean, where: string): ChatPiece[] {
  const full = render(messages, false);
  if (trainOnPrompt) return [{ text: full, train: true }];
  const pieces: ChatPiece[] = [];
  let cursor = 0;
  const starts: number[] = [];
  const idx: number[] = [];
  for (let i = 0; i < messages.length; i++) {
    if (messages[i]!.role !== "assistant") continue;
    const prefix = render(messages.slice(0, i), true);
    if (!full.startsWith(prefix)) throw new DataError(`${where}: the chat template renders the conversation before assistant turn ${i} (with the generation prompt) differently from the start of the whole conversation, so the turn cannot be located for masking; use a template that renders prefixes consistently (data.chat_template) or data.train_on_prompt`);
    starts.push(prefix.length);
    idx.push(i);
  }
  for (let k = 0; k < idx.length; k++) {
    const i = idx[k]!;
    const s = starts[k]!;
    if (s < cursor) throw new DataError(`${where}: assistant turn ${i} starts inside the previous assistant turn of the rendered conversation`);
    const upTo = render(messages.slice(0, i + 1), false);
    let e = commonPrefix(upTo, full);
    const limit = k + 1 < starts.length ? starts[k + 1]! : full.length;
    if (e <= s || e > limit) {
      // a turn rendered differently when last: its content in the whole render, then eos
      const content = messages[i]!.content;
      const at = content === "" ? s : full.indexOf(content, s);
      if (at < 0 || at + content.length > limit) throw new DataError(`${where}: assistant turn ${i} cannot be located in the rendered conversation (its render alone differs from the whole render, and its content is not there); use data.chat_template or data.train_on_prompt`);
      e = at + content.length;
      if (eos !== "" && full.startsWith(eos, e) && e + eos.length <= limit) e += eos.length;
    }
    // the turn ends with its eos token: what the template writes after it (a newline) is not the assistant's
    if (eos !== "") {
      const k = full.slice(s, e).lastIndexOf(eos);
      if (k >= 0) e = s + k + eos.length;
    }
    if (s > cursor) pieces.push({ text: full.slice(cursor, s), train: false });
    pieces.push({ text: full.slice(s, e), train: true });
    cursor = e;
  }
  if (cursor < full.length) pieces.push({ text: full.slice(cursor), train: false });
  return pieces;
}
