/**
 * `@zeromoe/kernels/testing` — what tests and benchmarks of every package share: seeded xorshift32
 * random data (reproducible inputs, bit-identical across runs).
 */
export { xorshift32, randomF32, randomF64 } from "./testing/random.ts";
