/**
 * The data pipeline of one rank: corpus → tokens → train/validation split → windows →
 * distributed, seeded, resumable micro-batches of input and target ids. Chat data (chat-corpus.ts)
 * comes as rows instead of a stream: each row is one window, with its labels (−100 off the
 * assistant turns) and, packed, its segment ids; the validation part is the tail of the rows.
 */
import type { DataConfig } from "../config/types.ts";
import { DistributedSampler, type SamplerState } from "./sampler.ts";
import { DataError, joinDocuments, loadCorpus, type Corpus } from "./sources.ts";
import { createTokenizer, type TokenArray, type Tokenizer } from "./tokenizer.ts";
import { fillWindow, splitTokens, windowCount } from "./windows.ts";
import { loadChatCorpus } from "./chat-corpus.ts";
import type { ChatRows } from "./chat-rows.ts";

/** One micro-batch: `inputs` and `targets` are Int32Array [micro, seqLen], row-major. */
export interface MicroBatch {
  inputs: Int32Array;
  targets: Int32Array;
  /** Rows (sequences). */
  micro: number;
  seqLen: number;
  /** Window ids of the rows (training: indices into the train windows). */
  windows: Int32Array;
  /** Where in the stream this batch came from (training batches only). */
  position?: SamplerState;
  /** Chat data: labels [micro, seqLen] aligned with `inputs` (the model shifts them; −100 = not
   * scored). Absent: the labels are the inputs (plain text, every position scored). */
  labels?: Int32Array;
  /** Chat data, packed: per-token segment ids [micro, seqLen] (tensor/ops/sequence-segments.ts). */
  segmentIds?: Int32Array;
}

/** A corpus of ready rows (chat data). */
export interface RowCorpus {
  name: string;
  rows: ChatRows;
}

/** Batch geometry and identity of this rank. */
export interface LoaderOptions {
  seqLen: number;
  validationFraction: number;
  /** train_micro_batch_size_per_gpu. */
  micro: number;
  /** gradient_accumulation_steps. */
  accum: number;
  /** dp world size. */
  worldSize: number;
  rank: number;
  seed: number;
}

/** Sizes, for logs and summaries. */
export interface DataInfo {
  dataset: string;
  tokenizer: string;
  vocabSize: number;
  totalTokens: number;
  trainTokens: number;
  validationTokens: number;
  trainWindows: number;
  validationWindows: number;
  /** Optimizer steps per epoch. */
  batchesPerEpoch: number;
}

/** Checkpointable loader state. */
export type DataState = SamplerState;

/** See the module comment. */
export class DataLoader {
  readonly info: DataInfo;
  private readonly train: TokenArray;
  private readonly validation: TokenArray;
  private readonly sampler: DistributedSampler;
  /** Chat rows and the first validation row; null for a token stream. */
  private readonly rows: ChatRows | null = null;
  private readonly firstValidationRow: number = 0;

  /**
   * @throws DataError when the training part holds fewer windows than one global batch, or the
   * validation part (when validationFraction > 0) fewer than one micro-batch per rank; the message
   * names the dataset and the number of tokens needed.
   */
  constructor(corpus: Corpus | RowCorpus, readonly tokenizer: Tokenizer, private readonly o: LoaderOptions) {
    const S = o.seqLen;
    const G = o.micro * o.accum * o.worldSize;
    let trainWindows: number;
    let validationWindows: number;
    if ("rows" in corpus) {
      const R = corpus.rows;
      if (R.seqLen !== S) throw new DataError(`${corpus.name}: rows of ${R.seqLen} tokens, expected seq_len ${S}`);
      this.rows = R;
      validationWindows = Math.floor(R.rows * o.validationFraction);
      trainWindows = R.rows - validationWindows;
      this.firstValidationRow = trainWindows;
      this.train = this.validation = new Uint16Array(0);
      const what = `${corpus.name}: ${R.examples} conversations make ${R.rows} rows of seq_len ${S}`;
      if (trainWindows < G) throw new DataError(`${what} (${trainWindows} for training); one global batch needs ${G} (micro ${o.micro} × accum ${o.accum} × dp ${o.worldSize})`);
      if (o.validationFraction > 0 && validationWindows < o.micro * o.worldSize) throw new DataError(`${what}; the validation part (validation_fraction ${o.validationFraction}) holds ${validationWindows}, one micro-batch per rank needs ${o.micro * o.worldSize}`);
    } else {
      const split = splitTokens(corpus.tokens, o.validationFraction);
      this.train = split.train;
      this.validation = split.validation;
      trainWindows = windowCount(this.train.length, S);
      validationWindows = windowCount(this.validation.length, S);
    }
    if (!("rows" in corpus) && trainWindows < G) {
      const need = Math.ceil((G * S + 1) / (1 - o.validationFraction));
      throw new DataError(
        `${corpus.name}: ${corpus.tokens.length} tokens (${this.train.length} for training) hold ${trainWindows} windows of seq_len ${S}; ` +
          `one global batch needs ${G} (micro ${o.micro} × accum ${o.accum} × dp ${o.worldSize}), i.e. at least ${need} tokens with validation_fraction ${o.validationFraction}`,
      );
    }
    if (!("rows" in corpus) && o.validationFraction > 0 && validationWindows < o.micro * o.worldSize) {
      const need = o.micro * o.worldSize * S + 1;
      throw new DataError(
        `${corpus.name}: the validation part (${this.validation.length} tokens, validation_fraction ${o.validationFraction}) holds ${validationWindows} windows of seq_len ${S}; ` +
          `one micro-batch per rank needs ${o.micro * o.worldSize}, i.e. at least ${need} validation tokens`,
      );
    }
    this.sampler = new DistributedSampler({ numWindows: trainWindows, micro: o.micro, accum: o.accum, worldSize: o.worldSize, rank: o.rank, seed: o.seed });
    this.info = {
      dataset: corpus.name,
      tokenizer: tokenizer.name,
      vocabSize: tokenizer.vocabSize,
      totalTokens: "rows" in corpus ? corpus.rows.rows * S : corpus.tokens.length,
      trainTokens: "rows" in corpus ? trainWindows * S : this.train.length,
      validationTokens: "rows" in corpus ? validationWindows * S : this.validation.length,
      trainWindows,
      validationWindows,
      batchesPerEpoch: this.sampler.batchesPerEpoch,
    };
  }

  /**
   * Builds the loader of a resolved `data` section: loads the corpus (offline) and tokenizes it;
   * chat data (a .jsonl of chat records, chat-corpus.ts) is rendered, masked and laid into rows.
   * `modelVocabSize` bounds the ids of a pre-tokenized `.bin` corpus (default: the tokenizer's).
   * `log` receives the chat summary line.
   * @throws DataError (missing file, bad format, too little data, template errors).
   */
  static async fromConfig(data: DataConfig, opts: Omit<LoaderOptions, "seqLen" | "validationFraction"> & { modelVocabSize?: number; log?: (line: string) => void }): Promise<DataLoader> {
    const tok = createTokenizer(data.tokenizer);
    const { modelVocabSize, log, ...loaderOpts } = opts;
    const got = await loadChatCorpus(data, tok);
    const chat = got !== null && "rows" in got ? got : null;
    if (chat !== null) {
      const r = chat.rows;
      log?.(`chat       ${r.examples} conversation${r.examples === 1 ? "" : "s"} → ${r.rows} row${r.rows === 1 ? "" : "s"} (${data.packing ? "packed" : "padded"}), ${r.scored} scored labels${data.train_on_prompt ? " (prompts too)" : " (assistant turns)"}${r.truncated > 0 ? `; ${r.truncated} cut to seq_len ${data.seq_len}` : ""}; template ${chat.template}`);
      return new DataLoader(chat, tok, { ...loaderOpts, seqLen: data.seq_len, validationFraction: data.validation_fraction });
    }
    // the chat keys act on chat data only: set on plain text they would be silently ignored
    const chatKeys = [data.chat_template != null && "data.chat_template", data.train_on_prompt && "data.train_on_prompt", data.packing && "data.packing"].filter((k): k is string => typeof k === "string");
    if (chatKeys.length > 0) throw new DataError(`${chatKeys.join(", ")} ${chatKeys.length > 1 ? "apply" : "applies"} to chat data, but ${data.dataset} is read as plain text (data.format ${JSON.stringify(data.format ?? "auto")}; chat data is a .jsonl or .parquet of messages, alpaca or sharegpt records)`);
    const corpus: Corpus = got !== null && "texts" in got
      ? { name: got.name, tokens: joinDocuments(got.texts.map((d) => tok.encode(d)), tok.documentSeparator, tok.vocabSize), documents: got.texts.length }
      : await loadCorpus(data.dataset, tok, modelVocabSize ?? tok.vocabSize);
    return new DataLoader(corpus, tok, { ...loaderOpts, seqLen: data.seq_len, validationFraction: data.validation_fraction });
  }

  private batchFrom(tokens: TokenArray, windows: Int32Array, rowBase = 0): MicroBatch {
    const S = this.o.seqLen;
    if (this.rows !== null) {
      const R = this.rows;
      const n = windows.length;
      const inputs = new Int32Array(n * S);
      const labels = new Int32Array(n * S);
      const targets = new Int32Array(n * S).fill(-100);
      const seg = R.segmentIds ? new Int32Array(n * S) : null;
      for (let r = 0; r < n; r++) {
        const o = (rowBase + windows[r]!) * S;
        inputs.set(R.ids.subarray(o, o + S), r * S);
        labels.set(R.labels.subarray(o, o + S), r * S);
        targets.set(R.labels.subarray(o + 1, o + S), r * S);
        if (seg) seg.set(R.segmentIds!.subarray(o, o + S), r * S);
      }
      return { inputs, targets, labels, ...(seg ? { segmentIds: seg } : {}), micro: n, seqLen: S, windows };
    }
    const inputs = new Int32Array(windows.length * S);
    const targets = new Int32Array(windows.length * S);
    for (let r = 0; r < windows.length; r++) fillWindow(tokens, windows[r], S, inputs, targets, r);
    return { inputs, targets, micro: windows.length, seqLen: S, windows };
  }

  /** This rank's next training micro-batch; advances the position. */
  nextMicroBatch(): MicroBatch {
    const { windows, position } = this.sampler.next();
    return { ...this.batchFrom(this.train, windows), position };
  }

  /** This rank's `accum` micro-batches of the next optimizer step. */
  nextStep(): MicroBatch[] {
    return Array.from({ length: this.o.accum }, () => this.nextMicroBatch());
  }

  /**
   * Up to `maxBatches` validation micro-batches of this rank, in order, unshuffled: validation
   * micro-batch slot j = b·dp + rank holds windows [j·micro, (j+1)·micro). The same on every call.
   */
  validationBatches(maxBatches = Infinity): MicroBatch[] {
    const { micro, worldSize, rank } = this.o;
    const slots = Math.floor(this.info.validationWindows / micro);
    const out: MicroBatch[] = [];
    for (let b = 0; out.length < maxBatches; b++) {
      const slot = b * worldSize + rank;
      if (slot >= slots) break;
      const w = Int32Array.from({ length: micro }, (_, i) => slot * micro + i);
      out.push(this.batchFrom(this.validation, w, this.firstValidationRow));
    }
    return out;
  }

  /** Position for a checkpoint. */
  state(): DataState {
    return this.sampler.state();
  }

  /** Resume from {@link state}. */
  loadState(s: DataState): void {
    this.sampler.loadState(s);
  }
}
