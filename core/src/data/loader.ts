/**
 * The data pipeline of one rank: corpus → tokens → train/validation split → windows →
 * distributed, seeded, resumable micro-batches of input and target ids.
 */
import type { DataConfig } from "../config/types.ts";
import { DistributedSampler, type SamplerState } from "./sampler.ts";
import { DataError, loadCorpus, type Corpus } from "./sources.ts";
import { createTokenizer, type TokenArray, type Tokenizer } from "./tokenizer.ts";
import { fillWindow, splitTokens, windowCount } from "./windows.ts";

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

  /**
   * @throws DataError when the training part holds fewer windows than one global batch, or the
   * validation part (when validationFraction > 0) fewer than one micro-batch per rank; the message
   * names the dataset and the number of tokens needed.
   */
  constructor(corpus: Corpus, readonly tokenizer: Tokenizer, private readonly o: LoaderOptions) {
    const S = o.seqLen;
    const split = splitTokens(corpus.tokens, o.validationFraction);
    this.train = split.train;
    this.validation = split.validation;
    const trainWindows = windowCount(this.train.length, S);
    const validationWindows = windowCount(this.validation.length, S);
    const G = o.micro * o.accum * o.worldSize;
    if (trainWindows < G) {
      const need = Math.ceil((G * S + 1) / (1 - o.validationFraction));
      throw new DataError(
        `${corpus.name}: ${corpus.tokens.length} tokens (${this.train.length} for training) hold ${trainWindows} windows of seq_len ${S}; ` +
          `one global batch needs ${G} (micro ${o.micro} × accum ${o.accum} × dp ${o.worldSize}), i.e. at least ${need} tokens with validation_fraction ${o.validationFraction}`,
      );
    }
    if (o.validationFraction > 0 && validationWindows < o.micro * o.worldSize) {
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
      totalTokens: corpus.tokens.length,
      trainTokens: this.train.length,
      validationTokens: this.validation.length,
      trainWindows,
      validationWindows,
      batchesPerEpoch: this.sampler.batchesPerEpoch,
    };
  }

  /**
   * Builds the loader of a resolved `data` section: loads the corpus (offline) and tokenizes it.
   * `modelVocabSize` bounds the ids of a pre-tokenized `.bin` corpus (default: the tokenizer's).
   * @throws DataError (missing file, bad format, too little data).
   */
  static async fromConfig(data: DataConfig, opts: Omit<LoaderOptions, "seqLen" | "validationFraction"> & { modelVocabSize?: number }): Promise<DataLoader> {
    const tok = createTokenizer(data.tokenizer);
    const { modelVocabSize, ...loaderOpts } = opts;
    const corpus = await loadCorpus(data.dataset, tok, modelVocabSize ?? tok.vocabSize);
    return new DataLoader(corpus, tok, { ...loaderOpts, seqLen: data.seq_len, validationFraction: data.validation_fraction });
  }

  private batchFrom(tokens: TokenArray, windows: Int32Array): MicroBatch {
    const S = this.o.seqLen;
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
      out.push(this.batchFrom(this.validation, w));
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
