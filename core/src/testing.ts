/**
 * `@zeromoe/core/testing` — what a plugin's own tests need: launching ranks, tiny jobs and models,
 * deterministic micro-batches, a rank entry that trains a job and reports what a plugin changes
 * (parameters, losses, memory per tag, padding, comm bytes, hook owners, logs), gathering full
 * parameters for comparison, reading a safetensors reference and measuring the error against it,
 * and a communicator that records how collectives interleave with the caller's events
 * (recording-communicator.ts). See docs/plugins.md §8.
 */
export { launch, LaunchError, type LaunchOptions, type RankEntry, type RankFailure } from "./launch/index.ts";
export { tinyModel, tinyLlamaModel, awkwardModel, AWKWARD_NUMEL, tinyJob } from "./testing/tiny-jobs.ts";
export { microBatch } from "./testing/micro-batch.ts";
export { gatherFullParams } from "./testing/gather-full-params.ts";
export { maxRelativeError } from "./testing/relative-error.ts";
export { FIXTURE_ENTRY, trainRank, type PadByTag, type TrainArgs, type TrainManyArgs, type TrainOut } from "./testing/train-rank.ts";
export { loadStateDict as readSafetensors, type LoadedTensor } from "./checkpoint/hf-load.ts";
export { createSoloCommunicator } from "./comm/solo.ts";
export { RecordingCommunicator, type CommEvent, type RecordingOptions } from "./testing/recording-communicator.ts";
