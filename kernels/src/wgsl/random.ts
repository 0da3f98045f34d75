/**
 * Philox stream fills on the GPU (`Backend.randomFill`): Philox4x32-10 and the integer Box–Muller and
 * uniform transforms, statement for statement the host's (kernels/src/numerics/philox.ts,
 * philox-transform.ts, random-fill.ts), so the values are bit-identical to the cpu backend's. Only the
 * key, the stream position and the scale reach the device (uniform parameters).
 *
 * One invocation per pair of destination elements: for an f32 destination elements 2t and 2t+1 of
 * the view; for a 16-bit one the u32 word t of the view's words (its halves outside the view are
 * kept, as the fill kernels do; wgsl/fill-copy-cast.ts). A normal pair whose two elements are the
 * cosine and sine halves of one Philox block (view offset and stream start of the same parity)
 * costs one block; otherwise each element takes its own. 64-bit stream positions are (lo, hi) words.
 */
import type { Buf, DType, RandomFillSpec } from "../backend.ts";
import { COS_Q31, LN2_Q59_HI, LN2_Q59_LO, LOG_Q31, LOG_TERMS_ABOVE_ONE, LOG_TERMS_NEAR_ONE, SIN_Q31, SQRT_HALF_Q32, scaleParts, uniformParts } from "../numerics/philox-transform.ts";
import type { Kernel, Launch } from "../webgpu/kernel.ts";
import { entry, EW_WG, f32s, groups, memoKernel, u32s } from "./launch.ts";
import { toHalfBits } from "./prelude.ts";
import { wordsTouched } from "./fill-copy-cast.ts";

const u = (v: number) => `${v >>> 0}u`;
const arr = (name: string, v: readonly number[]) => `var<private> ${name}: array<u32, ${v.length}> = array<u32, ${v.length}>(${v.map(u).join(", ")});`;

/** WGSL: Philox4x32-10, 32×32-bit high product, and the (M, E) helpers. */
export const PHILOX_WGSL = /* wgsl */ `
fn mulhi(a: u32, b: u32) -> u32 {
  let aL = a & 0xffffu; let aH = a >> 16u; let bL = b & 0xffffu; let bH = b >> 16u;
  let lh = aL * bH; let hl = aH * bL;
  let mid = ((aL * bL) >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return aH * bH + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
}

fn philox(c0: u32, c1: u32, c2: u32, k0: u32, k1: u32) -> vec4<u32> {
  var x0 = c0; var x1 = c1; var x2 = c2; var x3 = 0u;
  var a = k0; var b = k1;
  for (var r = 0u; r < 10u; r = r + 1u) {
    let hi0 = mulhi(0xd2511f53u, x0); let lo0 = 0xd2511f53u * x0;
    let hi1 = mulhi(0xcd9e8d57u, x2); let lo1 = 0xcd9e8d57u * x2;
    x0 = hi1 ^ x1 ^ a; x1 = lo1; x2 = hi0 ^ x3 ^ b; x3 = lo0;
    a = a + 0x9e3779b9u; b = b + 0xbb67ae85u;
  }
  return vec4<u32>(x0, x1, x2, x3);
}

// 64-bit stream position (lo, hi) + j
fn pos_add(s: vec2<u32>, j: u32) -> vec2<u32> {
  let lo = s.x + j;
  return vec2<u32>(lo, s.y + select(0u, 1u, lo < j));
}
`;

const TRANSFORM_WGSL = /* wgsl */ `
${arr("LOG_Q31", LOG_Q31)}
${arr("COS_Q31", COS_Q31)}
${arr("SIN_Q31", SIN_Q31)}

struct ME { m: u32, e: i32 }

fn pick(f: ME, t: ME, c: bool) -> ME { if (c) { return t; } return f; }

fn mul31(a: u32, b: u32) -> u32 { return (mulhi(a, b) << 1u) | ((a * b) >> 31u); }

fn mul_me(a: ME, b: ME) -> ME {
  let hi = mulhi(a.m, b.m);
  if (hi >= 0x80000000u) { return ME(hi, a.e + b.e); }
  return ME((hi << 1u) | ((a.m * b.m) >> 31u), a.e + b.e - 1);
}

fn from_q59(h: u32, l: u32) -> ME {
  let c = countLeadingZeros(h);
  if (c == 0u) { return ME(h, 5); }
  return ME((h << c) | (l >> (32u - c)), 5 - i32(c));
}

fn isqrt64(h: u32, l: u32) -> u32 {
  var r = 0u;
  for (var b = 31i; b >= 0i; b = b - 1i) {
    let c = r | (1u << u32(b));
    let sh = mulhi(c, c);
    let sl = c * c;
    if (sh < h || (sh == h && sl <= l)) { r = c; }
  }
  return r;
}

fn f32_bits(x: ME, neg: bool) -> u32 {
  let sign = select(0u, 0x80000000u, neg);
  if (x.m == 0u) { return sign; }
  var biased = x.e + 126;
  var mant = x.m >> 8u;
  let rem = x.m & 0xffu;
  if (rem > 0x80u || (rem == 0x80u && (mant & 1u) == 1u)) { mant = mant + 1u; }
  if (mant == 0x1000000u) { mant = 0x800000u; biased = biased + 1; }
  if (biased <= 0) { return sign; }
  if (biased >= 255) { return sign | 0x7f800000u; }
  return sign | (u32(biased) << 23u) | (mant & 0x7fffffu);
}

// Q5.59 value q = x as (hi, lo); x < 0.35, so x.e + 27 ≤ 27
fn q59_of(x: ME) -> vec2<u32> {
  let sh = x.e + 27;
  if (sh > 0) { return vec2<u32>(x.m >> (32u - u32(sh)), x.m << u32(sh)); }
  if (sh == 0) { return vec2<u32>(0u, x.m); }
  if (sh > -32) { return vec2<u32>(0u, x.m >> u32(-sh)); }
  return vec2<u32>(0u, 0u);
}

// Box–Muller pair of Philox words (x0, x1) times the scale s, as f32 bits (cos half, sin half)
fn normal_pair(x0: u32, x1: u32, s: ME) -> vec2<u32> {
  if (x0 == 0xffffffffu || s.m == 0u) { return vec2<u32>(0u, 0u); }
  let m = x0 + 1u;
  let n = countLeadingZeros(m);
  let F = m << n;
  var L: ME;
  if (F >= ${u(SQRT_HALF_Q32)}) {
    let T = 0u - F;
    var acc = LOG_Q31[${LOG_TERMS_NEAR_ONE}];
    for (var k = ${LOG_TERMS_NEAR_ONE - 1}i; k >= 0i; k = k - 1i) { acc = LOG_Q31[k] + mulhi(T, acc); }
    let nT = countLeadingZeros(T);
    let q = mul_me(ME(T << nT, -i32(nT)), ME(acc, 1));
    if (n == 0u) {
      L = q;
    } else {
      let pl = ${u(LN2_Q59_LO)} * n;
      let ph = ${u(LN2_Q59_HI)} * n + mulhi(${u(LN2_Q59_LO)}, n);
      let qq = q59_of(q);
      let l = pl + qq.y;
      L = from_q59(ph + qq.x + select(0u, 1u, l < pl), l);
    }
  } else {
    let T = F << 1u;
    let n1 = n + 1u;
    let pl = ${u(LN2_Q59_LO)} * n1;
    var h = ${u(LN2_Q59_HI)} * n1 + mulhi(${u(LN2_Q59_LO)}, n1);
    var l = pl;
    if (T != 0u) {
      var acc = LOG_Q31[${LOG_TERMS_ABOVE_ONE}];
      for (var k = ${LOG_TERMS_ABOVE_ONE - 1}i; k >= 0i; k = k - 1i) { acc = LOG_Q31[k] - mulhi(T, acc); }
      let nA = countLeadingZeros(acc);
      let nT = countLeadingZeros(T);
      let q = mul_me(ME(T << nT, -i32(nT)), ME(acc << nA, 1 - i32(nA)));
      let qq = q59_of(q);
      l = pl - qq.y;
      h = h - qq.x - select(0u, 1u, pl < qq.y);
    }
    L = from_q59(h, l);
  }
  let e2 = L.e + 1;
  var r: ME;
  if ((e2 & 1) == 0) { r = ME(isqrt64(L.m, 0u), e2 >> 1u); }
  else { r = ME(isqrt64(L.m >> 1u, (L.m & 1u) << 31u), (e2 + 1) >> 1u); }
  let W = x1 + 1u;
  let oct = W >> 29u;
  let sr = W & 0x1fffffffu;
  let sp = select(sr, 0x20000000u - sr, (oct & 1u) == 1u);
  let vq = sp << 2u;
  let V = mul31(vq, vq);
  var c = COS_Q31[5];
  for (var k = 4i; k >= 0i; k = k - 1i) { c = COS_Q31[k] - mul31(V, c); }
  let nC = countLeadingZeros(c);
  let cosA = ME(c << nC, 1 - i32(nC));
  var sinA = ME(0u, 0);
  if (sp != 0u) {
    var p = SIN_Q31[5];
    for (var k = 4i; k >= 0i; k = k - 1i) { p = SIN_Q31[k] - mul31(V, p); }
    let nP = countLeadingZeros(p);
    let nS = countLeadingZeros(sp);
    sinA = mul_me(ME(sp << nS, 3 - i32(nS)), ME(p << nP, 1 - i32(nP)));
  }
  let odd = (oct & 1u) == 1u;
  let cphi = pick(cosA, sinA, odd);
  let sphi = pick(sinA, cosA, odd);
  let q = oct >> 1u;
  let swap = (q & 1u) == 1u;
  let ac = pick(cphi, sphi, swap);
  let bs = pick(sphi, cphi, swap);
  var out = vec2<u32>(0u, 0u);
  if (ac.m != 0u) { out.x = f32_bits(mul_me(mul_me(r, ac), s), q == 1u || q == 2u); }
  if (bs.m != 0u) { out.y = f32_bits(mul_me(mul_me(r, bs), s), q == 2u || q == 3u); }
  return out;
}

// 64-bit stream position e → normal counter e >> 1
fn normal_elem(e: vec2<u32>) -> vec2<u32> {
  let pr = philox((e.x >> 1u) | (e.y << 31u), e.y >> 1u, 0u, P.k0, P.k1);
  return normal_pair(pr.x, pr.y, ME(P.sm, P.se));
}
`;

const UNIFORM_WGSL = /* wgsl */ `
fn uniform_word(x: u32) -> u32 {
  let u = f32(x >> 8u) * 5.9604644775390625e-8;
  // the xor with a runtime zero keeps the product and the sum two correctly rounded operations
  let p = bitcast<f32>(bitcast<u32>(P.span * u) ^ P.zero);
  return bitcast<u32>(P.lo + p);
}

fn uniform_elem(e: vec2<u32>) -> u32 {
  let w = philox((e.x >> 2u) | (e.y << 30u), e.y >> 2u, 1u, P.k0, P.k1);
  return uniform_word(w[e.x & 3u]);
}
`;

/** Body computing `v0`, `v1` (f32 bits) of the stream elements at 64-bit positions e0, e1 = e0 + 1,
 * each only when its flag `in0`/`in1` is set. */
function pairBody(dist: RandomFillSpec["dist"]): string {
  if (dist === "normal") {
    return `
  var v0 = 0u; var v1 = 0u;
  if ((e0.x & 1u) == 0u && in0 && in1) {
    let pr = philox((e0.x >> 1u) | (e0.y << 31u), e0.y >> 1u, 0u, P.k0, P.k1);
    let z = normal_pair(pr.x, pr.y, ME(P.sm, P.se));
    v0 = z.x; v1 = z.y;
  } else {
    if (in0) { let z = normal_elem(e0); v0 = select(z.x, z.y, (e0.x & 1u) == 1u); }
    if (in1) { let z = normal_elem(e1); v1 = select(z.x, z.y, (e1.x & 1u) == 1u); }
  }`;
  }
  return `
  var v0 = 0u; var v1 = 0u;
  if (in0) { v0 = uniform_elem(e0); }
  if (in1) { v1 = uniform_elem(e1); }`;
}

function kernelFor(dist: RandomFillSpec["dist"], dtype: DType): Kernel {
  const half = dtype === "f16" || dtype === "bf16";
  const label = `random_${dist}_${dtype}`;
  return memoKernel(label, () => {
    const params = [...u32s("doff", "n", "k0", "k1", "slo", "shi"), ...(dist === "normal" ? [...u32s("sm"), { name: "se", type: "i32" as const }] : [...f32s("lo", "span"), ...u32s("zero")])];
    // relative element j0 of the invocation's first slot (−1 as 0xffffffff for a 16-bit view at an odd offset)
    const j0 = half ? "2u * ((P.doff >> 1u) + t) - P.doff" : "2u * t";
    const store = half
      ? `
  let w = (P.doff >> 1u) + t;
  var word = b_dst[w];
  if (in0) { word = (word & 0xffff0000u) | ${toHalfBits(dtype, "bitcast<f32>(v0)")}; }
  if (in1) { word = (word & 0x0000ffffu) | (${toHalfBits(dtype, "bitcast<f32>(v1)")} << 16u); }
  b_dst[w] = word;`
      : `
  if (in0) { b_dst[P.doff + j0] = v0; }
  if (in1) { b_dst[P.doff + j0 + 1u] = v1; }`;
    const count = half ? "((P.doff + P.n - 1u) >> 1u) - (P.doff >> 1u) + 1u" : "(P.n + 1u) >> 1u";
    const code = `${PHILOX_WGSL}${dist === "normal" ? TRANSFORM_WGSL : UNIFORM_WGSL}
${entry(EW_WG)} {
  let t = wg_lin(wg, nwg) * ${EW_WG}u + li;
  if (P.n == 0u || t >= ${count}) { return; }
  let j0 = ${j0};
  let in0 = j0 < P.n;
  let in1 = j0 + 1u < P.n;
  // stream positions of the two slots: e1 = start + j0 + 1 (j0 + 1 ≥ 0 always), e0 = e1 − 1
  let e1 = pos_add(vec2<u32>(P.slo, P.shi), j0 + 1u);
  let e0 = vec2<u32>(e1.x - 1u, e1.y - select(0u, 1u, e1.x == 0u));
${pairBody(dist)}
${store}
}`;
    return { label, buffers: [{ name: "b_dst", type: half ? "w16" : "u32", write: true }], params, code };
  });
}

/** The launch filling n elements of `dst` from element `off` with the stream of `spec` (checked by
 * the caller: kernels/src/numerics/random-fill.ts `checkRandomFillSpec`). n < 2^32. */
export function randomFillLaunch(dst: Buf, off: number, n: number, spec: RandomFillSpec): Launch {
  const kernel = kernelFor(spec.dist, dst.dtype);
  const head = [off, n, spec.key[0], spec.key[1], spec.start >>> 0, Math.floor(spec.start / 4294967296)];
  let params: number[];
  if (spec.dist === "normal") {
    const { m, e } = scaleParts(spec.std);
    params = [...head, m, e];
  } else {
    const { lo32, span32 } = uniformParts(spec.lo, spec.hi);
    params = [...head, lo32, span32, 0];
  }
  const half = dst.dtype === "f16" || dst.dtype === "bf16";
  return { kernel, bufs: [dst], params, workgroups: groups(half ? wordsTouched(off, n) : Math.ceil(n / 2)) };
}
