/**
 * Tokenizing a masked conversation (core/src/data/chat-rows.ts tokenizePieces): the ids are the
 * whole render's encoding, whatever the tokenizer does at the start of an encode call (a
 * Metaspace-style tokenizer prepends "▁" once per call: encoding pieces one by one would put one
 * inside the conversation), and the trained labels are the assistant pieces' tokens.
 */
import { describe, expect, test } from "bun:test";
import { tokenizePieces } from "../../../src/data/chat-rows.ts";
import { ByteTokenizer, type Tokenizer } from "../../../src/data/tokenizer.ts";
import type { ChatPiece } from "../../../src/data/chat-masking.ts";
import { trainedText } from "./trained-text.ts";

/** Bytes, with id 256 ("▁") prepended to every encode call, as Metaspace's prepend_scheme "first" does. */
class PrependTokenizer implements Tokenizer {
  readonly name = "prepend";
  readonly vocabSize = 257;
  readonly documentSeparator = [] as const;
  private readonly b = new ByteTokenizer();
  encode(text: string): Uint16Array {
    return Uint16Array.from([256, ...this.b.encode(text)]);
  }
  decode(ids: ArrayLike<number>): string {
    return Array.from(ids, (i) => (i === 256 ? "▁" : String.fromCharCode(i))).join("");
  }
}

/** Merges "ab" into one token 300 (a token that can straddle a piece boundary). */
class MergeTokenizer implements Tokenizer {
  readonly name = "merge";
  readonly vocabSize = 301;
  readonly documentSeparator = [] as const;
  encode(text: string): Uint16Array {
    const out: number[] = [];
    for (let i = 0; i < text.length; i++) {
      if (text[i] === "a" && text[i + 1] === "b") {
        out.push(300);
        i++;
      } else out.push(text.charCodeAt(i));
    }
    return Uint16Array.from(out);
  }
  decode(ids: ArrayLike<number>): string {
    return Array.from(ids, (i) => (i === 300 ? "ab" : String.fromCharCode(i))).join("");
  }
}

const PIECES: ChatPiece[] = [
  { text: "<u>Hi</u><a>", train: false },
  { text: "Hello.</a>", train: true },
  { text: "<u>More</u><a>", train: false },
  { text: "Yes.</a>", train: true },
];


describe("tokenizePieces", () => {
  test("the ids are the whole render's encoding; labels the assistant pieces", () => {
    for (const tok of [new ByteTokenizer(), new PrependTokenizer()]) {
      const { ids, labels } = tokenizePieces(PIECES, tok);
      expect(Array.from(ids)).toEqual(Array.from(tok.encode(PIECES.map((p) => p.text).join(""))));
      expect(trainedText(tok, ids, labels)).toEqual(["Hello.</a>", "Yes.</a>"]);
    }
  });
  test("a token straddling a boundary goes to the later piece", () => {
    const tok = new MergeTokenizer();
    const { ids, labels } = tokenizePieces([{ text: "xa", train: false }, { text: "by", train: true }], tok);
    expect(Array.from(ids)).toEqual([120, 300, 121]);
    expect(Array.from(labels)).toEqual([-100, 300, 121]);
  });
});
