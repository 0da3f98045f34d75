/**
 * The operand pack of the tensor-core matmul (kernels/src/wgsl/matmul-coop-pack.ts) on its own,
 * bit for bit against a host reference: every destination half is f16(x·2^k) rounded to nearest
 * even (numerics/f16.ts implements the same integer rounding as the WGSL prelude), the bits of an
 * f16 source as they are, and 0 in the padding (columns ≥ cols, rows ≥ rows, the slice tail).
 *
 * Both loops of the kernel run: the 16-byte chunk loop (dst_ld, dst_stride multiples of 8: every
 * geometry the launches make) and the word loop (any even dst_ld / dst_stride), on f32, bf16 and
 * f16 sources at odd offsets, row strides and slice strides, with columns that leave a partial
 * last chunk and rows padded to a block. The exponent k comes from hand-set partial maxima.
 * Runs on any WebGPU adapter (lavapipe: no cooperative matrices needed).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Buf } from "../../src/backend.ts";
import { createGPU } from "../../src/ffi/index.ts";
import { bf16FromF32, bf16ToNumber, f16FromF32 } from "../../src/numerics/index.ts";
import { randomF64 } from "../../src/testing.ts";
import { assembleWgsl, type Launch } from "../../src/webgpu/kernel.ts";
import { coopPackHalves, coopPackLaunch, type CoopPackGeometry } from "../../src/wgsl/matmul-coop-pack.ts";
import { COOP_AMAX_PARTIALS, COOP_AMAX_WORDS, coopScaleExponent, finiteAbsBits } from "../../src/wgsl/matmul-coop-scale.ts";
import { readBack, uploadPadded } from "../ffi/setup.ts";

const adapter = await createGPU().requestAdapter();
let device: GPUDevice | null = null;
beforeAll(async () => {
  if (adapter) device = await adapter.requestDevice({ requiredFeatures: adapter.features.has("shader-f16") ? ["shader-f16"] : [] });
});
afterAll(() => device?.destroy());

const upload = (data: ArrayBufferView): GPUBuffer => uploadPadded(device!, data, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.UNIFORM);
const fakeBuf = (id: number, dtype: Buf["dtype"], length: number): Buf => ({ id, dtype, length, tag: "other" });

function runLaunch(l: Launch, gpuOf: Map<number, GPUBuffer>): void {
  const asm = assembleWgsl(l.kernel, l.bufs.map((b) => b.id));
  const pipe = device!.createComputePipeline({ layout: "auto", compute: { module: device!.createShaderModule({ code: asm.source }), entryPoint: "main" } });
  const params = new Uint32Array(Math.ceil(l.params.length / 4) * 4);
  params.set(l.params);
  const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: upload(params) } }];
  asm.slotOf.forEach((slot, i) => {
    if (!entries.some((e) => e.binding === slot + 1)) entries.push({ binding: slot + 1, resource: { buffer: gpuOf.get(l.bufs[i]!.id)! } });
  });
  const enc = device!.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipe);
  pass.setBindGroup(0, device!.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }));
  const w = l.workgroups as readonly [number, number, number];
  pass.dispatchWorkgroups(w[0], w[1], w[2]);
  pass.end();
  device!.queue.submit([enc.finish()]);
}

interface PackCase {
  name: string;
  src: "f32" | "bf16" | "f16";
  g: CoopPackGeometry;
}

/** Geometry helper: slices of rows × cols at srcOff with row stride srcLd and slice stride srcStride. */
const geo = (srcOff: number, rows: number, cols: number, srcLd: number, srcStride: number, slices: number, dstLd: number, dstRows: number, dstStride: number): CoopPackGeometry => ({ srcOff, rows, cols, srcLd, srcStride, slices, dstLd, dstRows, dstStride });

const CASES: PackCase[] = [
  { name: "f32, chunk loop: 45 columns (a partial last chunk), rows padded 37 → 40, 3 slices with gaps", src: "f32", g: geo(3, 37, 45, 50, 37 * 50 + 7, 3, 48, 40, 40 * 48 + 16) },
  { name: "bf16, chunk loop: odd offset, odd row and slice strides", src: "bf16", g: geo(5, 29, 64, 67, 29 * 67 + 3, 2, 72, 32, 32 * 72) },
  { name: "f16 (copied as bits), chunk loop: 7 columns (one partial chunk per row)", src: "f16", g: geo(1, 19, 7, 9, 0, 1, 8, 24, 24 * 8) },
  { name: "f32, word loop: dst_ld 10 (not a multiple of 8)", src: "f32", g: geo(0, 13, 9, 11, 13 * 11, 2, 10, 14, 14 * 10 + 2) },
  { name: "bf16, word loop: odd offset, 5 columns in rows of 6", src: "bf16", g: geo(3, 11, 5, 7, 11 * 7 + 1, 2, 6, 12, 12 * 6) },
  { name: "f32, chunk loop, many rows: 1031 × 100", src: "f32", g: geo(2, 1031, 100, 101, 0, 1, 104, 1032, 1032 * 104) },
];

describe("coop pack: bit-exact against the host reference (any WebGPU device)", () => {
  for (const c of CASES) {
    test.skipIf(!adapter)(c.name, async () => {
      const { g } = c;
      const n = g.srcOff + (g.slices - 1) * g.srcStride + (g.rows - 1) * g.srcLd + g.cols + 5;
      const u = randomF64(n, 4242 + n);
      // values over 2^-20 .. 2^20 (never f32-subnormal), sign mixed; gaps hold huge values that
      // must not be read into the copy
      const vals = Array.from(u, (x, i) => x * 2 ** Math.round(((i * 7919) % 41) - 20));
      let srcData: ArrayBufferView;
      let value: (i: number) => number;
      let bitsAt: ((i: number) => number) | null = null;
      if (c.src === "f32") {
        const a = Float32Array.from(vals);
        srcData = a;
        value = (i) => a[i]!;
      } else {
        const a = Uint16Array.from(vals, (x) => (c.src === "bf16" ? bf16FromF32(x) : f16FromF32(x / 2 ** 12)));
        srcData = a;
        value = (i) => bf16ToNumber(a[i]!);
        bitsAt = c.src === "f16" ? (i) => a[i]! : null;
      }
      // the operand's largest finite |x| over its elements only
      let maxBits = 0;
      for (let s = 0; s < g.slices; s++) for (let r = 0; r < g.rows; r++) for (let col = 0; col < g.cols; col++) maxBits = Math.max(maxBits, finiteAbsBits(value(g.srcOff + s * g.srcStride + r * g.srcLd + col)));
      const k = coopScaleExponent(maxBits);
      const amax = new Uint32Array(COOP_AMAX_WORDS);
      amax[COOP_AMAX_PARTIALS + 17] = maxBits; // B's partials (which = 1), one of them the maximum
      const halves = coopPackHalves(g);
      const dst = new Uint16Array(halves).fill(0xbeef);
      const gSrc = upload(srcData), gDst = upload(dst), gAmax = upload(amax);
      const scaled = c.src !== "f16";
      const l = coopPackLaunch(fakeBuf(1, c.src, n), fakeBuf(2, "f16", halves), g, scaled ? fakeBuf(3, "u32", COOP_AMAX_WORDS) : null, 1)!;
      expect(l.kernel.label.endsWith("_x8")).toBe(g.dstLd % 8 === 0 && g.dstStride % 8 === 0);
      runLaunch(l, new Map([[1, gSrc], [2, gDst], [3, gAmax]]));
      const got = new Uint16Array(await readBack(device!, gDst, halves * 2));
      let bad = 0;
      let first = "";
      for (let s = 0; s < g.slices; s++) {
        for (let q = 0; q < g.dstStride; q++) {
          const r = Math.floor(q / g.dstLd), col = q % g.dstLd;
          let want = 0;
          if (r < g.rows && col < g.cols) {
            const i = g.srcOff + s * g.srcStride + r * g.srcLd + col;
            want = bitsAt ? bitsAt(i) : f16FromF32(Math.fround(value(i) * 2 ** k));
          }
          const at = s * g.dstStride + q;
          if (got[at] !== want) {
            if (!bad) first = `slice ${s} row ${r} col ${col}: got 0x${got[at]!.toString(16)}, want 0x${want.toString(16)}`;
            bad++;
          }
        }
      }
      expect(first || "all halves exact").toBe("all halves exact");
      for (const b of [gSrc, gDst, gAmax]) b.destroy();
    }, 300_000);
  }
});
