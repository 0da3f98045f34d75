/**
 * Chat/instruction JSONL formats (core/src/data/chat-formats.ts): each shape parsed into messages,
 * and each kind of bad record refused with a DataError naming file, line and field.
 */
import { describe, expect, test } from "bun:test";
import { MAX_CHAT_LINE_CHARS, MAX_CHAT_TURNS, parseChatJsonl } from "../../../src/data/chat-formats.ts";
import { DataError } from "../../../src/data/sources.ts";

const F = "/data/chat.jsonl";
const lines = (...recs: unknown[]) => recs.map((r) => (typeof r === "string" ? r : JSON.stringify(r))).join("\n") + "\n";

function refuse(text: string, format: "auto" | "messages" | "alpaca" | "sharegpt", ...parts: string[]): void {
  let err: unknown;
  try {
    parseChatJsonl(text, F, format);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(DataError);
  for (const p of parts) expect((err as Error).message).toContain(p);
}

describe("chat formats", () => {
  test("messages, alpaca and sharegpt records become the same conversations", () => {
    const m = parseChatJsonl(
      lines(
        { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] },
        "",
        { messages: [{ role: "user", content: "2+2?" }, { role: "assistant", content: "4" }, { role: "user", content: "and 3+3?" }, { role: "assistant", content: "6" }] },
      ),
      F,
      "auto",
    );
    expect(m).toEqual([
      { line: 1, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] },
      { line: 3, messages: [{ role: "user", content: "2+2?" }, { role: "assistant", content: "4" }, { role: "user", content: "and 3+3?" }, { role: "assistant", content: "6" }] },
    ]);
    const a = parseChatJsonl(lines({ instruction: "Translate", input: "chat", output: "cat" }, { instruction: "Say hi", input: "", output: "hi", system: "Be brief." }), F, "auto");
    expect(a).toEqual([
      { line: 1, messages: [{ role: "user", content: "Translate\n\nchat" }, { role: "assistant", content: "cat" }] },
      { line: 2, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hi" }, { role: "assistant", content: "hi" }] },
    ]);
    const s = parseChatJsonl(lines({ system: "Be brief.", conversations: [{ from: "human", value: "Hi" }, { from: "gpt", value: "Hello." }] }), F, "sharegpt");
    expect(s).toEqual([{ line: 1, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] }]);
    // a text dataset is told apart (the plain-text reader takes it)
    expect(parseChatJsonl(lines({ text: "plain" }), F, "auto")).toEqual({ text: true });
  });

  test("bad records: file, line and field named", () => {
    const ok = { messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] };
    refuse(lines(ok, "{not json"), "auto", `${F}:2`, "not valid JSON");
    refuse(lines(ok, [1, 2]), "auto", `${F}:2`, "expected a JSON object, got an array");
    refuse(lines(ok, { messages: [{ role: "bot", content: "x" }] }), "auto", `${F}:2`, "messages[0].role", '"bot"');
    refuse(lines({ messages: [{ role: "user" }, { role: "assistant", content: "x" }] }), "auto", `${F}:1`, "messages[0].content", "missing");
    refuse(lines(ok, { messages: [{ content: "x" }, { role: "assistant", content: "y" }] }), "auto", `${F}:2`, "messages[0].role", "nothing (the field is missing)");
    refuse(lines({ conversations: [{ value: "x" }, { from: "gpt", value: "y" }] }), "auto", `${F}:1`, "conversations[0].from", "nothing (the field is missing)");
    refuse(lines({ messages: [{ role: "user", content: "x" }, { role: "assistant", content: 3 }] }), "auto", `${F}:1`, "messages[1].content", "a number");
    refuse(lines({ messages: "hi" }), "auto", `${F}:1`, 'field "messages"', "a string");
    refuse(lines({ messages: [] }), "auto", `${F}:1`, "empty");
    refuse(lines({ messages: [{ role: "user", content: "x" }] }), "auto", `${F}:1`, "no assistant turn");
    refuse(lines({ messages: [{ role: "user", content: "x" }, { role: "system", content: "late" }, { role: "assistant", content: "y" }] }), "auto", `${F}:1`, "system message is allowed only as the first turn");
    refuse(lines(ok, { instruction: "x", output: "y" }), "auto", `${F}:2`, "expected a messages record", "got an alpaca record");
    refuse(lines(ok), "alpaca", `${F}:1`, "expected an alpaca record (as data.format says), got a messages record");
    refuse(lines({ instruction: "x" }), "alpaca", `${F}:1`, 'field "output"', "missing");
    refuse(lines({ instruction: "x", input: 5, output: "y" }), "alpaca", `${F}:1`, 'field "input"');
    refuse(lines({ output: "y" }), "alpaca", `${F}:1`, 'field "instruction"');
    refuse(lines({ conversations: [{ from: "human", value: "x" }, { from: "robot", value: "y" }] }), "auto", `${F}:1`, "conversations[1].from", '"robot"');
    refuse(lines({ conversations: [{ from: "human", value: "x" }, { from: "gpt" }] }), "auto", `${F}:1`, "conversations[1].value");
    refuse(lines({ conversations: [{ from: "human", value: "x" }, "gpt"] }), "auto", `${F}:1`, "conversations[1]", "expected an object");
    refuse(lines({ prompt: "x", completion: "y" }), "auto", `${F}:1`, "cannot tell the record's format");
    refuse("\n\n", "auto", F, "no conversations");
  });

  test("bounds come first: turns and line length", () => {
    const turns = Array.from({ length: MAX_CHAT_TURNS + 1 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: "x" }));
    refuse(lines({ messages: turns }), "auto", `${F}:1`, `${MAX_CHAT_TURNS + 1} turns`, `limit of ${MAX_CHAT_TURNS}`);
    // an overlong line is refused by its length, before JSON parsing (it is not even valid JSON)
    refuse(lines({ messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: "Hello." }] }, "[" + "x".repeat(MAX_CHAT_LINE_CHARS)), "auto", `${F}:2`, "over the", "character limit");
  });
});
