/**
 * The fused LM head + loss (core/src/tensor/ops/linear-cross-entropy.ts) at a real shape: wall time
 * of the forward (loss read back) and of the backward (dh and dW, flushed), their TFLOP/s (forward
 * 1 product, backward 3, each 2·T·H·V flops), and the peak device memory of the op; then a check
 * of the last repetition's loss, dh and dW against PyTorch in float64 (core/bench/torch_fused_head.py,
 * which also times PyTorch's unfused head in fp32 and under bf16 autocast for comparison).
 *
 *   bun core/bench/fused-head.ts [--tokens 8192] [--hidden 4096] [--vocab 128256] [--reps 3]
 *     [--backend webgpu|cpu] [--tensor-cores off|auto|on|emulated] [--chunk N] [--tile N]
 *     [--tile-bytes B] [--z-loss 0] [--check torch|none] [--dir /tmp/zm-fused-head] [--python python3]
 *
 * Data: hidden uniform with std 1 (the head sees RMS-normed states), weight uniform with std 0.02
 * (the models' initializer_range), targets uniform in [0, vocab) with every 20th −100; seeded, so
 * runs repeat. The head's inputs are f32 in every job precision (a 16-bit job reads its head weight
 * through the unit's f32 working copy), so `--tensor-cores` is what a bf16 job changes: its matmuls
 * then run on the tensor cores (f16 products with f32 accumulation).
 * The check passes when the loss is within `lossTol` relative and dh, dW within `gradTol` of their
 * largest entry: 1e-5 / 1e-4 with f32 products (K-term f32 sums), 2e-3 / 2e-2 on the tensor cores
 * (f16 operands carry 2⁻¹¹ relative each). Exit status 1 when the check fails.
 */
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { createBackend, type Backend } from "@zeromoe/kernels";
import { xorshift32 } from "@zeromoe/kernels/testing";
import { Variable, backward, fromArray, linearCrossEntropy, planTiles } from "../src/tensor/index.ts";
import { spawnSync } from "node:child_process";

const { values: a } = parseArgs({
  options: {
    tokens: { type: "string", default: "8192" },
    hidden: { type: "string", default: "4096" },
    vocab: { type: "string", default: "128256" },
    reps: { type: "string", default: "3" },
    backend: { type: "string", default: "webgpu" },
    "tensor-cores": { type: "string", default: "off" },
    chunk: { type: "string" },
    tile: { type: "string" },
    "tile-bytes": { type: "string" },
    "z-loss": { type: "string", default: "0" },
    check: { type: "string", default: "torch" },
    dir: { type: "string", default: "/tmp/zm-fused-head" },
    python: { type: "string", default: "python3" },
  },
});

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`fused-head: --${name} must be a positive integer, got ${JSON.stringify(v)}`);
    process.exit(2);
  }
  return n;
}
const T = int("tokens", a.tokens)!;
const H = int("hidden", a.hidden)!;
const V = int("vocab", a.vocab)!;
const reps = int("reps", a.reps)!;
const z = Number(a["z-loss"]);
if (!(z >= 0)) {
  console.error(`fused-head: --z-loss must be a number ≥ 0, got ${a["z-loss"]}`);
  process.exit(2);
}
const tc = a["tensor-cores"]!;
if (!["off", "auto", "on", "emulated"].includes(tc)) {
  console.error(`fused-head: --tensor-cores must be off, auto, on or emulated, got ${tc}`);
  process.exit(2);
}
if (a.backend !== "webgpu" && a.backend !== "cpu") {
  console.error(`fused-head: --backend must be webgpu or cpu, got ${a.backend}`);
  process.exit(2);
}
if (a.check !== "torch" && a.check !== "none") {
  console.error(`fused-head: --check must be torch or none, got ${a.check}`);
  process.exit(2);
}
const opts = { chunkTokens: int("chunk", a.chunk), tileVocab: int("tile", a.tile), tileBytes: int("tile-bytes", a["tile-bytes"]), zLoss: z };

const tensorCores = tc === "off" ? {} : { tensorCores: tc === "on" ? true : (tc as "auto" | "emulated") };
const { backend: be, reason } = await createBackend(a.backend as "webgpu" | "cpu", tensorCores);
const status = (be as { tensorCoresStatus?: string }).tensorCoresStatus ?? "-";
console.log(`backend ${be.info.name}: ${reason}; tensor cores ${status}`);
const plan = planTiles(be, T, V, opts);
console.log(`shape T=${T} H=${H} V=${V}, z-loss ${z}; tiles ${plan.chunkTokens} tokens × ${plan.tileVocab} vocabulary (${((4 * plan.chunkTokens * plan.tileVocab) / 2 ** 20).toFixed(1)} MiB), ${Math.ceil(T / plan.chunkTokens)} chunks × ${Math.ceil(V / plan.tileVocab)} tiles`);

/** n f32 uniform in [−a, a) from xorshift32(seed), written straight into a Float32Array (a
 * float64 staging array of V·H values would be 4.2 GB at the Llama-3 head). */
function uniform(n: number, seed: number, amp: number): Float32Array {
  const next = xorshift32(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = amp * (2 * (next() / 2 ** 32) - 1);
  return out;
}
const hiddenData = uniform(T * H, 1, Math.sqrt(3));
const weightData = uniform(V * H, 2, 0.02 * Math.sqrt(3));
const next = xorshift32(3);
const targets = Int32Array.from({ length: T }, (_, i) => (i % 20 === 19 ? -100 : next() % V));
const numValid = targets.reduce((n, t) => n + (t === -100 ? 0 : 1), 0);
const h = new Variable(be, hiddenData, [T, H]);
const w = new Variable(be, weightData, [V, H]);
const tg = fromArray(be, targets, [T], "i32");
tg.retain();

async function once(): Promise<{ loss: number; fwdMs: number; bwdMs: number }> {
  h.zeroGrad();
  w.zeroGrad();
  await be.flush();
  const t0 = performance.now();
  const loss = linearCrossEntropy(h.tensor, w.tensor, tg, numValid, { ...opts, hostTargets: targets });
  const v = (await loss.retain().toArray())[0]!;
  const t1 = performance.now();
  await backward(loss);
  await be.flush();
  const t2 = performance.now();
  loss.dispose();
  return { loss: v, fwdMs: t1 - t0, bwdMs: t2 - t1 };
}

const flops = 2 * T * H * V;
await once(); // compiles the pipelines, grows the pools
be.resetPeak();
const before = be.memory();
let last = { loss: 0, fwdMs: 0, bwdMs: 0 };
for (let r = 0; r < reps; r++) {
  last = await once();
  console.log(`rep ${r + 1}: loss ${last.loss.toFixed(6)}  forward ${last.fwdMs.toFixed(1)} ms (${(flops / last.fwdMs / 1e9).toFixed(1)} TFLOP/s)  backward ${last.bwdMs.toFixed(1)} ms (${((3 * flops) / last.bwdMs / 1e9).toFixed(1)} TFLOP/s)  total ${(last.fwdMs + last.bwdMs).toFixed(1)} ms`);
}
const mem = be.memory();
const gib = (b: number) => (b / 2 ** 30).toFixed(3);
console.log(`memory: peak total ${gib(mem.peakTotal)} GiB (inputs and their gradients ${gib(before.current.param + before.current.grad + before.current.other + before.current.activation)} GiB before the reps); peak activation ${gib(mem.peak.activation)} GiB — the whole logits would be ${gib(4 * T * V)} GiB`);

if (a.check === "none") process.exit(0);
const dir = a.dir!;
mkdirSync(dir, { recursive: true });
const dh = (await h.grad()) as Float32Array;
const dw = (await w.grad()) as Float32Array;
/** Write a typed array in pieces of 256 MiB (one write call takes less than 2 GiB). */
function dump(name: string, x: ArrayBufferView): void {
  const fd = openSync(`${dir}/${name}`, "w");
  try {
    const piece = 2 ** 28;
    for (let o = 0; o < x.byteLength; o += piece) writeSync(fd, new Uint8Array(x.buffer, x.byteOffset + o, Math.min(piece, x.byteLength - o)));
  } finally {
    closeSync(fd);
  }
}
dump("hidden.f32", hiddenData);
dump("weight.f32", weightData);
dump("targets.i32", targets);
dump("dh.f32", dh);
dump("dw.f32", dw);
const coop = status.startsWith("on") || tc === "emulated";
const lossTol = coop ? 2e-3 : 1e-5;
const gradTol = coop ? 2e-2 : 1e-4;
writeFileSync(`${dir}/meta.json`, JSON.stringify({ T, H, V, z, numValid, loss: last.loss, lossTol, gradTol }));
console.log(`check: ${a.python} core/bench/torch_fused_head.py --dir ${dir} (loss within ${lossTol} relative, dh/dW within ${gradTol} of their largest entry)`);
const p = spawnSync(a.python!, ["core/bench/torch_fused_head.py", "--dir", dir], { stdio: ["ignore", "inherit", "inherit"] });
destroy(be);
process.exit(p.status ?? 1);

function destroy(b: Backend): void {
  (b as { destroy?: () => void }).destroy?.();
}
