/**
 * `@zeromoe/kernels/testing` — what tests and benchmarks of every package share: seeded xorshift32
 * random data (reproducible inputs, bit-identical across runs) and GPU time per call from a
 * profiling WebGpuBackend.
 */
export { xorshift32, randomF32, randomF64, tiledRandomF32, RANDOM_BLOCK } from "./testing/random.ts";
export { gpuMsPerCall, HEATER_TAG, type GpuCallTime } from "./testing/profiled-timing.ts";
