/** Data: corpora, tokenizers, splitting, seeded distributed sampling. */
export { DataLoader, type DataInfo, type DataState, type LoaderOptions, type MicroBatch } from "./loader.ts";
export { DistributedSampler, type SamplerOptions, type SamplerState } from "./sampler.ts";
export { DataError, loadCorpus, joinDocuments, parseJsonl, readTokenBin, type Corpus } from "./sources.ts";
export { ByteTokenizer, Gpt2Tokenizer, createTokenizer, type TokenArray, type Tokenizer } from "./tokenizer.ts";
export { HfTokenizer, hfTokenizerVocabSize, tokenizerJsonPath, tokenizerJsonVocabSize } from "./hf-tokenizer.ts";
export { fillWindow, splitTokens, windowCount, type TokenSplit } from "./windows.ts";
export { Rng, mixSeed, permutation, shuffleInPlace } from "./prng.ts";
