/**
 * Split-K for the tensor-core matmul's weight-gradient layout (transA, not transB: out[M, N] (+)=
 * A[K, M]ᵀ·B[K, N]), whose outputs are small (1024×1024 = 64 blocks of 128×128 for 132 SMs) while
 * K (tokens) is long. K is cut into `splits` chunks of `chunk` rows (the last one shorter if K is
 * not a multiple); chunk z of A and B are the row blocks starting at z·chunk, so the chunks run as
 * ONE batched coop matmul (batch = splits, batch strides chunk·M and chunk·N) into a scratch
 * [splits, M, N] — except that the kernel's K is per launch, so a ragged last chunk runs as a
 * second launch. {@link coopSplitKReduceWGSL} then writes out = (accumulate ? out : 0) + Σ_z
 * scratch[z] in ascending z (deterministic; no atomics). CUTLASS's "parallel split-K" (NVIDIA
 * CUTLASS docs, "Efficient GEMM in CUDA").
 */

/** Uniform parameters of the reduce, in order (u32): elements of out, splits, out offset. */
export const COOP_SPLIT_K_REDUCE_PARAMS = ["count", "splits", "c_off"] as const;

/** Invocations per workgroup of the reduce. */
export const COOP_SPLIT_K_REDUCE_WG = 256;

/**
 * WGSL of the reduce: bindings 0 params ({@link COOP_SPLIT_K_REDUCE_PARAMS}), 1 scratch
 * (`array<f32>`, splits × count packed), 2 out (`array<f32>`, count elements from c_off).
 * Dispatch ceil(count / 256) workgroups (x; at most 65535: count < 16.7M).
 */
export function coopSplitKReduceWGSL(accumulate: boolean): string {
  return `// coop_split_k_reduce${accumulate ? "_acc" : ""}: out ${accumulate ? "+" : ""}= sum of the split-K partials, in ascending order
struct Params { count: u32, splits: u32, c_off: u32 };
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(${COOP_SPLIT_K_REDUCE_WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let e = gid.x;
  if (e >= P.count) { return; }
  var s = ${accumulate ? "out[P.c_off + e]" : "0.0"};
  for (var z = 0u; z < P.splits; z++) { s += part[z * P.count + e]; }
  out[P.c_off + e] = s;
}
`;
}

/** The chunking of K for `splits` chunks: chunk rows (a multiple of `align`, the kernel's BK
 * rounded so vec4 strides stay aligned) and how many full chunks precede a ragged last one. */
export function coopSplitKChunks(K: number, splits: number, align: number): { chunk: number; full: number; last: number } {
  if (!Number.isInteger(splits) || splits < 1) throw new Error(`coop split-K: splits must be a positive integer, got ${splits}`);
  const chunk = Math.max(align, Math.ceil(K / splits / align) * align);
  const full = Math.min(splits, Math.floor(K / chunk));
  const last = K - full * chunk;
  return { chunk, full, last };
}
