/**
 * The engine tests' fixtures are the public test kit `@zeromoe/core/testing` (core/src/testing/):
 * tiny job configs, deterministic micro-batches, and the rank entry `FIXTURE_ENTRY` that trains a
 * few steps and returns parameters, losses, memory and comm figures. Re-exported here so core's
 * own tests keep their short import.
 */
export { AWKWARD_NUMEL, awkwardModel, FIXTURE_ENTRY, gatherFullParams, microBatch, tinyJob, tinyModel, trainRank, type PadByTag, type TrainArgs, type TrainManyArgs, type TrainOut } from "../../src/testing.ts";
