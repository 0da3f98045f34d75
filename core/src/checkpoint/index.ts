/**
 * Checkpoint and Hugging Face weight files for library users (`@zeromoe/core/checkpoint`): Hub
 * directories (config.json + safetensors, sharded or not) read into an engine or a model, state
 * dicts read and written as safetensors, Hub exports, and the sharded-checkpoint consolidation.
 * A script that trains from a Hub directory needs only these and `@zeromoe/core` (the engine's
 * saveCheckpoint/loadCheckpoint/save16bitModel are methods of Engine).
 */
export { HubCheckpoint, HUB_INDEX_FILE, checkHubShapes, initFromHub, planHubLoad, type HubInitResult, type HubParam, type HubPlan } from "./hub-dir.ts";
export { decodeTensor, loadStateDict, type LoadedTensor, type LoadStateDictOptions } from "./hf-load.ts";
export { castTo16, saveStateDict, type SaveStateDictOptions, type SaveTensor } from "./hf-save.ts";
export { formatHfConfigJson, hfConfigObject, writeHfConfig } from "./hf-config.ts";
export { HubDirWriter, planHubShards, type HubShardPlan } from "./hub-export.ts";
export { zeroToFp32, type ConsolidateOptions, type ConsolidateResult } from "./consolidate.ts";
export { CheckpointError, CheckpointWriteError } from "./errors.ts";
export { SafetensorsError, SafetensorsReader, SafetensorsWriter, writeSafetensors, type SafetensorsDType, type SafetensorsTensor, type SafetensorsTensorInfo } from "./safetensors.ts";
export { locateCheckpoint, readManifest, type CheckpointManifest } from "./manifest.ts";
export { applyManifestBuffers, manifestModelBuffers } from "./manifest-buffers.ts";
