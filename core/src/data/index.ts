/** Data: corpora, tokenizers, splitting, seeded distributed sampling. */
export { DataLoader, type DataInfo, type DataState, type LoaderOptions, type MicroBatch, type RowCorpus } from "./loader.ts";
export { DistributedSampler, type SamplerOptions, type SamplerState } from "./sampler.ts";
export { DataError, loadCorpus, joinDocuments, parseJsonl, readTokenBin, type Corpus } from "./sources.ts";
export { ByteTokenizer, Gpt2Tokenizer, createTokenizer, type TokenArray, type Tokenizer } from "./tokenizer.ts";
export { HfTokenizer, hfTokenizerVocabSize, tokenizerJsonPath, tokenizerJsonVocabSize } from "./hf-tokenizer.ts";
export { fillWindow, splitTokens, windowCount, type TokenSplit } from "./windows.ts";
export { Rng, mixSeed, permutation, shuffleInPlace } from "./prng.ts";
export { parseChatJsonl, recordToMessages, MAX_CHAT_LINE_CHARS, MAX_CHAT_TURNS, type ChatFormat, type ChatMessage, type ChatRole, type Conversation, type DataFormat } from "./chat-formats.ts";
export { CompiledChatTemplate, loadChatTemplate, renderChatTemplate, type ChatTemplateSpec } from "./chat-template.ts";
export { renderConversationPieces, renderPrompts } from "./chat-render.ts";
export { assistantPieces, type ChatPiece } from "./chat-masking.ts";
export { chatRows, tokenizePieces, type ChatExample, type ChatRows } from "./chat-rows.ts";
export { loadChatCorpus, type ChatCorpus } from "./chat-corpus.ts";
