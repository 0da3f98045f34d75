/**
 * Numeric WebGPU flag values (W3C WebGPU §"GPUBufferUsage", "GPUMapMode", "GPUShaderStage").
 *
 * Written out here rather than read from the `GPUBufferUsage` globals, which not every WebGPU
 * implementation installs (our wgpu-native binding through bun:ffi need not; Deno does).
 */

/** GPUBufferUsage bits. */
export const BufferUsage = {
  MAP_READ: 0x0001,
  MAP_WRITE: 0x0002,
  COPY_SRC: 0x0004,
  COPY_DST: 0x0008,
  INDEX: 0x0010,
  VERTEX: 0x0020,
  UNIFORM: 0x0040,
  STORAGE: 0x0080,
  INDIRECT: 0x0100,
  QUERY_RESOLVE: 0x0200,
} as const;

/** GPUMapMode bits. */
export const MapMode = { READ: 0x0001, WRITE: 0x0002 } as const;

/** GPUShaderStage bits. */
export const ShaderStage = { VERTEX: 0x1, FRAGMENT: 0x2, COMPUTE: 0x4 } as const;

/** Largest workgroup count per dispatch dimension (WebGPU default `maxComputeWorkgroupsPerDimension`). */
export const MAX_WORKGROUPS_PER_DIM = 65535;
