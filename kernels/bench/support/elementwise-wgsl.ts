/**
 * The streaming kernel of the elementwise bandwidth benchmark: y = alpha·x + beta over n f32
 * elements (n a multiple of 4), vec4 loads and stores, grid-stride loop. 8 bytes move per element
 * (x read, y written), the same traffic as PyTorch's `torch.mul(x, 2, out=y)` reference.
 *
 * Bindings (group 0): 0 x (storage, read, vec4<f32>), 1 y (storage, read_write), 2 params (uniform:
 * u32 n4 = n/4, u32 stride = total threads, f32 alpha, f32 beta).
 */

/** Threads per workgroup of {@link AFFINE_VEC4_WGSL}. */
export const AFFINE_WORKGROUP = 256;

/** WGSL of the streaming y = alpha·x + beta kernel. */
export const AFFINE_VEC4_WGSL = /* wgsl */ `
struct P { n4: u32, stride: u32, alpha: f32, beta: f32 };
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(${AFFINE_WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  var i = gid.x;
  loop {
    if (i >= p.n4) { break; }
    y[i] = fma(x[i], vec4<f32>(p.alpha), vec4<f32>(p.beta));
    i = i + p.stride;
  }
}`;

/** Params uniform bytes for n elements (n % 4 == 0) and `workgroups` workgroups. Throws otherwise. */
export function affineParams(n: number, workgroups: number, alpha: number, beta: number): ArrayBuffer {
  if (n % 4 !== 0) throw new Error(`elementwise bench: n must be a multiple of 4, got ${n}`);
  const buf = new ArrayBuffer(16);
  const u = new Uint32Array(buf), f = new Float32Array(buf);
  u[0] = n / 4;
  u[1] = workgroups * AFFINE_WORKGROUP;
  f[2] = alpha;
  f[3] = beta;
  return buf;
}
