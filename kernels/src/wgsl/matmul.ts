/**
 * Tiled f32 matmul with workgroup-memory tiles: out[b] (+)= op(A[b]) · op(B[b]) (backend.ts
 * MatmulSpec). This is the correct, portable baseline; a faster kernel may replace the internals
 * of {@link planMatmul} keeping its signature (the one entry point the backend calls).
 *
 * Tiling: a 64×64 output tile per workgroup of 256 invocations (16×16), each computing a 4×4 block
 * (rows ty+16i, cols tx+16j); K is walked in steps of 16 with A and B tiles staged in workgroup
 * memory (As[k][m], Bs[k][n]); global loads map the contiguous memory axis to consecutive
 * invocations for each of the four transA/transB layouts. Edges are bounds-checked (zeros loaded),
 * so any M, N, K work. grid = [ceil(N/64), ceil(M/64), batch], batches beyond 65535 in chunks.
 */
import type { Buf, MatmulSpec } from "../backend.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { memoKernel, u32s } from "./launch.ts";

const TM = 64;
const TN = 64;
const TK = 16;

function matmulKernel(transA: boolean, transB: boolean): Kernel {
  return memoKernel(`matmul_${transA ? "t" : "n"}${transB ? "t" : "n"}`, () => buildMatmulKernel(transA, transB));
}

function buildMatmulKernel(transA: boolean, transB: boolean): Kernel {
  // A tile: As[kk * TM + mm] = op(A)[m0+mm, k0+kk]; 1024 elements, 4 per invocation.
  const loadA = transA
    ? `let mm = e % ${TM}u; let kk = e / ${TM}u; let gm = m0 + mm; let gk = k0 + kk;
      var v: f32 = 0.0; if (gm < P.M && gk < P.K) { v = b_a[abase + gk * P.M + gm]; }
      As[kk * ${TM}u + mm] = v;`
    : `let kk = e % ${TK}u; let mm = e / ${TK}u; let gm = m0 + mm; let gk = k0 + kk;
      var v: f32 = 0.0; if (gm < P.M && gk < P.K) { v = b_a[abase + gm * P.K + gk]; }
      As[kk * ${TM}u + mm] = v;`;
  const loadB = transB
    ? `let kk = e % ${TK}u; let nn = e / ${TK}u; let gn = n0 + nn; let gk = k0 + kk;
      var v: f32 = 0.0; if (gn < P.N && gk < P.K) { v = b_b[bbase + gn * P.K + gk]; }
      Bs[kk * ${TN}u + nn] = v;`
    : `let nn = e % ${TN}u; let kk = e / ${TN}u; let gn = n0 + nn; let gk = k0 + kk;
      var v: f32 = 0.0; if (gn < P.N && gk < P.K) { v = b_b[bbase + gk * P.N + gn]; }
      Bs[kk * ${TN}u + nn] = v;`;
  return {
    label: `matmul_${transA ? "t" : "n"}${transB ? "t" : "n"}`,
    buffers: [
      { name: "b_a", type: "f32", write: false },
      { name: "b_b", type: "f32", write: false },
      { name: "b_out", type: "f32", write: true },
    ],
    params: u32s("aoff", "boff", "ooff", "M", "N", "K", "sA", "sB", "sO", "accumulate", "batchBase"),
    code: /* wgsl */ `
var<workgroup> As: array<f32, ${TK * TM}>;
var<workgroup> Bs: array<f32, ${TK * TN}>;
@compute @workgroup_size(256) fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let bi = P.batchBase + wg.z;
  let m0 = wg.y * ${TM}u;
  let n0 = wg.x * ${TN}u;
  let abase = P.aoff + bi * P.sA;
  let bbase = P.boff + bi * P.sB;
  let obase = P.ooff + bi * P.sO;
  let tx = li % 16u;
  let ty = li / 16u;
  var acc: array<f32, 16>;
  for (var i = 0u; i < 16u; i = i + 1u) { acc[i] = 0.0; }
  for (var k0 = 0u; k0 < P.K; k0 = k0 + ${TK}u) {
    for (var l = 0u; l < 4u; l = l + 1u) {
      let e = li + 256u * l;
      ${loadA}
    }
    for (var l = 0u; l < 4u; l = l + 1u) {
      let e = li + 256u * l;
      ${loadB}
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${TK}u; kk = kk + 1u) {
      var a: array<f32, 4>;
      var b: array<f32, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) { a[i] = As[kk * ${TM}u + ty + 16u * i]; b[i] = Bs[kk * ${TN}u + tx + 16u * i]; }
      for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) { acc[i * 4u + j] = acc[i * 4u + j] + a[i] * b[j]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i = i + 1u) {
    let gm = m0 + ty + 16u * i;
    if (gm >= P.M) { continue; }
    for (var j = 0u; j < 4u; j = j + 1u) {
      let gn = n0 + tx + 16u * j;
      if (gn >= P.N) { continue; }
      let o = obase + gm * P.N + gn;
      if (P.accumulate != 0u) { b_out[o] = b_out[o] + acc[i * 4u + j]; } else { b_out[o] = acc[i * 4u + j]; }
    }
  }
}`,
  };
}

/** Elements each of A, B, out must hold from their offsets for `spec` (for bounds checks). */
export function matmulExtents(spec: MatmulSpec): { a: number; b: number; out: number } {
  const batch = spec.batch ?? 1;
  const { M, N, K } = spec;
  const sA = spec.strideA ?? M * K;
  const sB = spec.strideB ?? K * N;
  const sO = spec.strideOut ?? M * N;
  if (batch === 0 || M * N === 0) return { a: 0, b: 0, out: 0 };
  return { a: (batch - 1) * sA + M * K, b: (batch - 1) * sB + K * N, out: (batch - 1) * sO + M * N };
}

/**
 * Plan the dispatches of one matmul (the swappable entry point). Strides default to dense packing
 * (M·K, K·N, M·N). Throws on non-integer/negative sizes or an output grid beyond 65535 tiles per
 * dimension. K = 0 writes zeros (or leaves out unchanged with `accumulate`).
 */
export function planMatmul(a: Buf, aoff: number, b: Buf, boff: number, out: Buf, ooff: number, spec: MatmulSpec, maxPerDim = 65535): Launch[] {
  const { M, N, K } = spec;
  const batch = spec.batch ?? 1;
  for (const [k, v] of Object.entries({ M, N, K, batch })) {
    if (!Number.isInteger(v) || v < 0) throw new Error(`webgpu matmul: spec.${k} must be a non-negative integer, got ${v}`);
  }
  const sA = spec.strideA ?? M * K;
  const sB = spec.strideB ?? K * N;
  const sO = spec.strideOut ?? M * N;
  if (M === 0 || N === 0 || batch === 0) return [];
  const gx = Math.ceil(N / TN);
  const gy = Math.ceil(M / TM);
  if (gx > maxPerDim || gy > maxPerDim) throw new Error(`webgpu matmul: ${M}×${N} output needs a ${gy}×${gx} tile grid, above ${maxPerDim} per dimension`);
  const kernel = matmulKernel(!!spec.transA, !!spec.transB);
  const launches: Launch[] = [];
  for (let base = 0; base < batch; base += maxPerDim) {
    const nb = Math.min(maxPerDim, batch - base);
    launches.push({ kernel, bufs: [a, b, out], params: [aoff, boff, ooff, M, N, K, sA, sB, sO, spec.accumulate ? 1 : 0, base], workgroups: [gx, gy, nb] });
  }
  return launches;
}
