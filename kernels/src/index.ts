/**
 * Public entry of @zeromoe/kernels (its only export, `.`): the device contract (`Backend`, `Buf`,
 * `View`, dtypes, memory tags), the backends (cpu, webgpu), backend selection (`createBackend`),
 * the environment report (`collectReport`, `bun run report`) and the 16-bit float conversions.
 * Other packages import only this entry, never `kernels/src/...` paths (docs/architecture.md).
 */
export * from "./backend.ts";
export { CpuBackend, type CpuBackendOptions, type CpuPrecision } from "./cpu/index.ts";
export { WebGpuBackend, type BatchTiming, type MatmulTuning, type SubmitReason, type WebGpuBackendOptions, type WebGpuStats } from "./webgpu/index.ts";
export { createGPU, enumerateAdapters, libraryVersion, type CreateGPUOptions } from "./ffi/index.ts";
export { createBackend, verifyBackend, adapterIndexForRank, softwareDriverNote, type AdapterKind, type BackendKind, type CreateBackendOptions, type SelectedBackend } from "./select.ts";
export { DEFAULT_PROBE_SHAPE, clampProbeShape, prepareProbe, timeProbe, type PreparedProbe, type ProbeShape } from "./speed-probe.ts";
export { collectReport, formatReport, setAutoChoiceProvider, REPORT_LIMITS, type Report, type AdapterReport, type AutoChoice } from "./report.ts";
export { f32ToBits, bitsToF32, f16ToNumber, f16FromNumber, f16FromF32, f16FromF32Bits, bf16ToNumber, bf16FromNumber, bf16FromF32, bf16FromF32Bits } from "./numerics/index.ts";
export { philox4x32, philoxBlocks, philoxBlocksInto, mulhi32, PHILOX_WASM_MAX_WORDS } from "./numerics/philox.ts";
export { philoxFill, checkRandomFillSpec } from "./numerics/random-fill.ts";
export { FLASH_BLOCKS, chooseFlashBlocks, type FlashBlock } from "./wgsl/attention-flash.ts";
export { COOP_ATTN_DEFAULT_BLOCKS, type CoopAttnBlock, type CoopAttnBlocks } from "./wgsl/attention-coop.ts";
