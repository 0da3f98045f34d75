/**
 * Runs a chat template over a dataset's conversations in a worker (chat-render-worker.ts) with a
 * watchdog: when no conversation finishes for `stallMs` the worker is terminated and a DataError
 * names the conversation (a hostile or broken template must not hang training). Output length
 * and range() are bounded inside the render (chat-template.ts).
 */
import { startWorker } from "@zeromoe/kernels/runtime";
import { DataError } from "./sources.ts";
import type { ChatTemplateSpec } from "./chat-template.ts";
import type { Conversation } from "./chat-formats.ts";
import type { ChatPiece } from "./chat-masking.ts";

/** Default watchdog: seconds a single conversation may take to render (real templates take well under a millisecond). */
export const DEFAULT_RENDER_STALL_MS = 30_000;

/** Message to the worker. */
export interface RenderRequest {
  kind: "pieces" | "prompt";
  spec: ChatTemplateSpec;
  conversations: readonly Conversation[];
  /** The dataset file, for messages. */
  path: string;
  trainOnPrompt: boolean;
}

type Reply = { i: number; pieces?: ChatPiece[]; text?: string } | { error: string; data: boolean };

function run(req: RenderRequest, stallMs: number): Promise<Reply[]> {
  const n = req.conversations.length;
  const out: Reply[] = new Array(n);
  return new Promise((resolve, reject) => {
    const w = startWorker<RenderRequest, Reply>(new URL("./chat-render-worker.ts", import.meta.url));
    let done = 0;
    let timer: ReturnType<typeof setTimeout>;
    const finish = (err: Error | null) => {
      clearTimeout(timer);
      w.terminate();
      if (err) reject(err);
      else resolve(out);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        const c = req.conversations[done];
        finish(new DataError(`${req.path}:${c?.line ?? "?"}: the chat template ${req.spec.origin} ran for over ${stallMs / 1000} s on one conversation and was stopped (a template that loops without end?)`));
      }, stallMs);
    };
    w.onmessage = (ev) => {
      const r = ev.data;
      if ("error" in r) return finish(r.data ? new DataError(r.error) : new DataError(`${req.path}: rendering the chat template failed: ${r.error}`));
      out[r.i] = r;
      done++;
      if (done === n) finish(null);
      else arm();
    };
    w.onerror = (ev) => finish(new DataError(`${req.path}: the chat template worker failed: ${ev.message}`));
    arm();
    if (n === 0) finish(null);
    else w.postMessage(req);
  });
}

/**
 * The masking pieces of every conversation (chat-masking.ts assistantPieces), in order.
 * @throws DataError from the template or masking (naming file:line), or when one conversation takes over `stallMs`.
 */
export async function renderConversationPieces(spec: ChatTemplateSpec, conversations: readonly Conversation[], path: string, trainOnPrompt: boolean, stallMs = DEFAULT_RENDER_STALL_MS): Promise<ChatPiece[][]> {
  const r = await run({ kind: "pieces", spec, conversations, path, trainOnPrompt }, stallMs);
  return r.map((x) => (x as { pieces: ChatPiece[] }).pieces);
}

/**
 * Each conversation rendered with the generation prompt (generate's `--chat` prompt).
 * @throws DataError as {@link renderConversationPieces}.
 */
export async function renderPrompts(spec: ChatTemplateSpec, conversations: readonly Conversation[], path: string, stallMs = DEFAULT_RENDER_STALL_MS): Promise<string[]> {
  const r = await run({ kind: "prompt", spec, conversations, path, trainOnPrompt: false }, stallMs);
  return r.map((x) => (x as { text: string }).text);
}
