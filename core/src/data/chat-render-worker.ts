/**
 * Worker of chat-render.ts: renders conversations with an untrusted chat template off the main
 * thread, so that the main thread can stop a template that runs too long (terminate). Posts one
 * message per conversation: `{ i, pieces }` or `{ i, text }`, or `{ error }` and stops.
 */
import { CompiledChatTemplate } from "./chat-template.ts";
import { assistantPieces } from "./chat-masking.ts";
import type { RenderRequest } from "./chat-render.ts";
import { serveParent } from "@zeromoe/kernels/runtime";

const post = serveParent<RenderRequest, unknown>((req) => {
  try {
    const t = new CompiledChatTemplate(req.spec);
    req.conversations.forEach((c, i) => {
      const where = `${req.path}:${c.line}`;
      if (req.kind === "prompt") {
        post({ i, text: t.render(c.messages, true, where) });
      } else {
        const pieces = assistantPieces(c.messages, (m, g) => t.render(m, g, where), req.spec.specials.eos_token, req.trainOnPrompt, where);
        post({ i, pieces });
      }
    });
  } catch (e) {
    post({ error: (e as Error).message, data: (e as Error).name === "DataError" });
  }
});
