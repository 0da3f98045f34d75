/**
 * Hugging Face Hub checkpoints as `--init-from` / `"model": {"from_pretrained": DIR}` read them: a
 * directory written by `save_pretrained` (config.json plus `model.safetensors`, or the sharded
 * `model-0000k-of-0000n.safetensors` with `model.safetensors.index.json`), the index file itself,
 * or one `.safetensors` file — in either weight layout (hub-layouts.ts).
 *
 * {@link HubCheckpoint.open} reads only the headers (each shard's, validated by safetensors.ts, and
 * the index, bounded before parsing). {@link initFromHub} first checks every parameter of the model
 * against them on every rank — all missing tensors are listed at once, a shape mismatch names both
 * shapes, tensors the model does not use are returned as warnings (as Transformers does:
 * "Some weights of the checkpoint were not used") — then streams tensor by tensor: each rank reads
 * only the element ranges its own shards hold (ZeRO-3 shard, or the units it holds), converts
 * them (F32/F16/BF16/F64 → f32 → the unit's dtype, round to nearest even) and writes them into its
 * buffers. No rank holds the whole model. The fp32 master copy of a 16-bit unit is initialised
 * from the loaded values: F32/F64 file values as they are (so `--save-init` weights, written in
 * fp32, come back exactly), 16-bit ones widened; optimizer moments stay zero. `tie_word_embeddings`: a tied model has no `lm_head.weight`
 * parameter, and a stored one is accepted (Transformers writes it for some tied models).
 */
import { existsSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import type { CheckpointTarget } from "../engine/stateful.ts";
import { decodeTensor } from "./hf-load.ts";
import { castTo16 } from "./hf-save.ts";
import { readHubIndex } from "./hub-index.ts";
import { findSource, type TensorSource } from "./hub-layouts.ts";
import { SafetensorsError, SafetensorsReader, type SafetensorsTensorInfo } from "./safetensors.ts";
import { pathForMessage, quoteUntrusted } from "../config/quote-untrusted.ts";

/** Index file name of a sharded checkpoint. */
export const HUB_INDEX_FILE = "model.safetensors.index.json";

/** How many names (or mismatches) an error lists before "… and N more": a config that disagrees
 * with every tensor (Mixtral weights into a Llama job) gave one 2,500-character line. */
const LIST_LIMIT = 3;

/** A tensor name for a message: as it is when short and printable, else a bounded quoted excerpt. */
function nameFor(n: string): string {
  return n.length <= 80 && /^[\x21-\x7e]+$/.test(n) ? n : quoteUntrusted(n, 80);
}

function listNames(names: readonly string[]): string {
  const shown = names.slice(0, LIST_LIMIT).map(nameFor).join(", ");
  return names.length > LIST_LIMIT ? `${shown} … and ${names.length - LIST_LIMIT} more` : shown;
}

/** The `.experts.` / `.mlp.` shape of a set of tensor names: MoE, dense or neither. */
function hasExperts(names: Iterable<string>): boolean {
  for (const n of names) if (/\.experts\.|block_sparse_moe|\.mlp\.gate\.weight$/.test(n)) return true;
  return false;
}

/**
 * One sentence guessing why a checkpoint and a model disagree, from what is missing, what is stored
 * unused and the shape mismatches: a MoE checkpoint for a dense config (or the reverse), another
 * architecture's tensor names, fewer layers than num_hidden_layers, or sizes (hidden_size, …)
 * that differ from the weights'.
 */
function likelyCause(missing: readonly string[], unused: readonly string[], mismatched: readonly { stored: readonly number[]; needed: readonly number[] }[]): string {
  if (missing.length > 0 && unused.length > 0) {
    const ckptMoe = hasExperts(unused);
    const modelMoe = hasExperts(missing);
    if (ckptMoe && !modelMoe) return "the checkpoint holds a mixture-of-experts model and the config a dense one: its config.json's model_type (or the job's model section) does not describe these weights";
    if (modelMoe && !ckptMoe) return "the config describes a mixture-of-experts model and the checkpoint holds a dense one: its config.json's model_type (or the job's model section) does not describe these weights";
    return `the checkpoint's tensor names are another architecture's or naming's (${unused.length} stored tensor${unused.length === 1 ? "" : "s"} the model does not use, such as ${listNames(unused.slice(0, 1))}): check model_type`;
  }
  if (missing.length > 0) {
    const layers = missing.map((n) => /^model\.layers\.(\d+)\./.exec(n)).filter((m) => m !== null).map((m) => Number(m![1]));
    if (layers.length === missing.length) return `the config has more layers than the weights (the first missing one is layer ${Math.min(...layers)}): check num_hidden_layers`;
    return "the checkpoint is incomplete (a shard left out of the index?) or is another model's";
  }
  const pairs = new Set<string>();
  for (const m of mismatched) {
    if (m.stored.length !== m.needed.length) continue;
    m.stored.forEach((d, i) => {
      if (d !== m.needed[i]) pairs.add(`${d} where the config gives ${m.needed[i]}`);
    });
  }
  const shown = [...pairs].slice(0, LIST_LIMIT);
  return shown.length > 0 ? `the config's sizes differ from the weights' (the weights have ${shown.join(", ")}${pairs.size > LIST_LIMIT ? ", …" : ""}): check hidden_size, intermediate_size, the head counts and vocab_size against the checkpoint's config.json` : "the config's sizes differ from the weights'";
}

/** The weight files of a Hub checkpoint and the headers of their tensors (see the module comment). */
export class HubCheckpoint {
  private readonly readers = new Map<string, SafetensorsReader>();
  /** Tensor name → the file holding it and its header entry. */
  readonly tensors = new Map<string, { file: string; info: SafetensorsTensorInfo }>();

  private constructor(
    /** What was opened (directory, index or file), for messages. */
    readonly path: string,
    /** The directory's config.json, or null (a single file, or none present). */
    readonly configFile: string | null,
  ) {}

  /**
   * Open `path` (directory, index file or `.safetensors` file) and read every header.
   * @throws SafetensorsError naming the file for a directory with no weights, a malformed index or
   *   shard, a tensor in two shards, or an index entry its shard does not hold.
   */
  static open(path: string): HubCheckpoint {
    if (!existsSync(path)) throw new SafetensorsError(path, "no such file or directory");
    const isDir = statSync(path).isDirectory();
    const dir = isDir ? path : join(path, "..");
    let index: string | null = null;
    let files: string[];
    let weightMap: Map<string, string> | null = null;
    if (isDir) {
      if (existsSync(join(path, HUB_INDEX_FILE))) index = join(path, HUB_INDEX_FILE);
      else if (existsSync(join(path, "model.safetensors"))) files = [join(path, "model.safetensors")];
      else throw new SafetensorsError(path, `directory holds neither model.safetensors nor ${HUB_INDEX_FILE} (a Hugging Face save_pretrained directory has one of them)`);
    } else if (basename(path).endsWith(".index.json")) {
      index = path;
    }
    if (index !== null) {
      weightMap = readHubIndex(index);
      files = [...new Set(weightMap.values())].sort().map((f) => join(dir, f));
    } else if (!isDir) {
      files = [path];
    }
    const cfg = join(dir, "config.json");
    const hub = new HubCheckpoint(path, (isDir || index !== null) && existsSync(cfg) ? cfg : null);
    try {
      for (const file of files!) {
        if (!existsSync(file)) throw new SafetensorsError(index ?? path, `names shard ${quoteUntrusted(basename(file))}, which does not exist in ${pathForMessage(dir)}`);
        const r = SafetensorsReader.open(file);
        hub.readers.set(file, r);
        for (const info of r.header.tensors) {
          const prev = hub.tensors.get(info.name);
          if (prev) throw new SafetensorsError(file, `tensor also stored in ${quoteUntrusted(basename(prev.file))}`, info.name);
          hub.tensors.set(info.name, { file, info });
        }
      }
      if (weightMap) {
        for (const [name, f] of weightMap) {
          const got = hub.tensors.get(name);
          if (!got || basename(got.file) !== f) throw new SafetensorsError(index!, `weight_map puts it in ${quoteUntrusted(f)}, which does not hold it`, name);
        }
      }
    } catch (e) {
      hub.close();
      throw e;
    }
    return hub;
  }

  /** Stored shapes by name. */
  shapes(): Map<string, readonly number[]> {
    return new Map([...this.tensors].map(([n, t]) => [n, t.info.shape]));
  }

  /** Elements [start, start + count) of tensor `name` as raw bytes (see safetensors.ts). */
  readElements(name: string, start: number, count: number): { bytes: Uint8Array; info: SafetensorsTensorInfo; file: string } {
    const t = this.tensors.get(name);
    if (!t) throw new SafetensorsError(this.path, "no such tensor", name);
    return { bytes: this.readers.get(t.file)!.readTensorElements(name, start, count), info: t.info, file: t.file };
  }

  /** Close every shard. */
  close(): void {
    for (const r of this.readers.values()) r.close();
    this.readers.clear();
  }
}

/** A parameter as the loader sees it. */
export interface HubParam {
  name: string;
  shape: readonly number[];
}

/** Where each parameter comes from, and what the checkpoint holds that the model does not use. */
export interface HubPlan {
  sources: Map<string, TensorSource>;
  /** Stored tensors no parameter reads (sorted). */
  unexpected: string[];
}

/**
 * Match `params` (every parameter of the model, whatever this rank holds) against the checkpoint.
 * `lm_head.weight` is accepted unused when `tied`; `rotary_emb.inv_freq` buffers are ignored.
 * @throws SafetensorsError counting the missing tensors and the shape mismatches, with the first few
 *   of each (both shapes) and the likely cause (a MoE checkpoint for a dense config, other names,
 *   fewer layers, different sizes).
 */
export function planHubLoad(hub: HubCheckpoint, params: readonly HubParam[], tied: boolean, buffers: readonly string[] = []): HubPlan {
  const shapes = hub.shapes();
  const sources = new Map<string, TensorSource>();
  const missing: string[] = [];
  const mismatched: string[] = [];
  const mismatchShapes: { stored: readonly number[]; needed: readonly number[] }[] = [];
  const used = new Set<string>();
  for (const p of params) {
    const s = findSource(p.name, p.shape, shapes);
    if (!s) {
      missing.push(p.name);
      continue;
    }
    const stored = shapes.get(s.tensor)!;
    const fits = stored.length === s.shape.length && stored.every((d, i) => d === s.shape[i]) && s.offset + p.shape.reduce((a, b) => a * b, 1) <= stored.reduce((a, b) => a * b, 1);
    if (!fits) {
      mismatched.push(`${nameFor(s.tensor)}${s.tensor === p.name ? "" : ` (for ${p.name})`}: checkpoint has [${stored.slice(0, 8).join(", ")}${stored.length > 8 ? ", …" : ""}], the model needs [${s.shape.join(", ")}]`);
      mismatchShapes.push({ stored, needed: s.shape });
    }
    used.add(s.tensor);
    sources.set(p.name, s);
  }
  const problems: string[] = [];
  if (missing.length > 0) problems.push(`${missing.length} tensor${missing.length === 1 ? "" : "s"} the model needs ${missing.length === 1 ? "is" : "are"} missing: ${listNames(missing)}`);
  if (mismatched.length > 0) problems.push(`${mismatched.length} shape mismatch${mismatched.length === 1 ? "" : "es"}: ${mismatched.slice(0, LIST_LIMIT).join("; ")}${mismatched.length > LIST_LIMIT ? ` … and ${mismatched.length - LIST_LIMIT} more` : ""}`);
  if (problems.length > 0) {
    const unused = [...shapes.keys()].filter((n) => !used.has(n) && !n.endsWith("rotary_emb.inv_freq") && !(tied && n === "lm_head.weight") && !buffers.includes(n));
    throw new SafetensorsError(hub.path, `${problems.join("; ")}. Likely cause: ${likelyCause(missing, unused, mismatchShapes)}`);
  }
  if (tied) used.add("lm_head.weight");
  // the model's buffers (DeepSeek-V3's e_score_correction_bias) are read when stored, never required
  for (const b of buffers) if (shapes.has(b)) used.add(b);
  const unexpected = [...shapes.keys()].filter((n) => !used.has(n) && !n.endsWith("rotary_emb.inv_freq")).sort();
  return { sources, unexpected };
}

/**
 * Match the Hub checkpoint at `path` (directory, index or file) against a model's parameters from
 * its headers alone, before the model is built: callers pass the parameters of the model built
 * unallocated (`createModel(…, { allocate: false })`: names and shapes, no memory), so a
 * config.json claiming a larger model than its weights is refused without allocating the claimed
 * model (it cost 2.2 GB and 9.6 s in train, 1.36 GB in eval).
 * @throws SafetensorsError of {@link planHubLoad} (missing tensors and shape mismatches, summarised), or of
 *   the readers (malformed headers, a missing shard).
 */
export function checkHubShapes(path: string, params: readonly HubParam[], tied: boolean, buffers: readonly string[] = []): void {
  const hub = HubCheckpoint.open(path);
  try {
    planHubLoad(hub, params, tied, buffers);
  } finally {
    hub.close();
  }
}

/** What {@link initFromHub} did on this rank. */
export interface HubInitResult {
  /** Tensor ranges read and elements written on this rank. */
  reads: number;
  elements: number;
  /** Checkpoint tensors the model does not use (the same on every rank). */
  unexpected: string[];
  /** One line for the log when `unexpected` is not empty (as Transformers warns), else null. */
  warning: string | null;
}

/**
 * Initialise `engine`'s parameters from the Hub checkpoint at `path` (module comment). Not a
 * collective; every rank calls it.
 * @throws SafetensorsError naming the path/file and tensors (missing, shapes, dtype, malformed files).
 */
export async function initFromHub(engine: CheckpointTarget, path: string): Promise<HubInitResult> {
  const hub = HubCheckpoint.open(path);
  const be = engine.job.be;
  let reads = 0;
  let elements = 0;
  const mastered = new Set<unknown>();
  try {
    const params = engine.modelUnits.flatMap((u) => u.params.map((p) => ({ name: p.name, shape: p.shape })));
    const buffers = engine.modelBuffers();
    const plan = planHubLoad(hub, params, engine.job.config.model.tie_word_embeddings, [...buffers.keys()]);
    for (const u of engine.modelUnits) {
      const h = engine.handleOf(u);
      if (!h) continue; // held by another rank (expert parallelism)
      const stored = h.paramStorage();
      const lo = stored.start;
      const hi = stored.start + stored.count;
      // a 16-bit unit's fp32 master takes full-precision file values as they are (not the 16-bit
      // rounding initMaster makes from the stored parameters): a run resumes the master --save-init
      // wrote. The optimizer range lies inside the parameter range on every ZeRO stage.
      const masterWrites: { off: number; data: Float32Array }[] = [];
      const os = h.optimStart;
      const oe = os + h.optimCount;
      for (const p of u.params) {
        const a = Math.max(lo, p.offset);
        const b = Math.min(hi, p.offset + p.numel);
        if (a >= b) continue;
        const src = plan.sources.get(p.name)!;
        const { bytes, info, file } = hub.readElements(src.tensor, src.offset + (a - p.offset), b - a);
        const dec = decodeTensor(bytes, { ...info, shape: [b - a], numel: b - a }, file);
        if (dec.dtype !== "f32") throw new SafetensorsError(file, `holds integers (${info.dtype}); a parameter needs a floating dtype`, src.tensor);
        const f32 = dec.data as Float32Array;
        if (stored.buf.dtype === "f32") be.write({ buf: stored.buf, off: a - lo }, f32);
        else be.write({ buf: stored.buf, off: a - lo }, castTo16(f32, stored.buf.dtype === "bf16" ? "BF16" : "F16"));
        const ma = Math.max(a, os);
        const mb = Math.min(b, oe);
        if (u.dtype !== "f32" && u.trainable && (info.dtype === "F32" || info.dtype === "F64") && ma < mb) masterWrites.push({ off: ma - os, data: f32.subarray(ma - a, mb - a) });
        reads++;
        elements += b - a;
      }
      await engine.initMaster(h);
      for (const w of masterWrites) await h.writeOptimizerState("master", w.off, w.data);
      mastered.add(h);
    }
    // buffers: small, read whole on every rank (they are the same everywhere)
    for (const [name, arr] of buffers) {
      const shape = hub.shapes().get(name);
      if (!shape) continue;
      const n = shape.reduce((a, b) => a * b, 1);
      if (n !== arr.length) throw new SafetensorsError(hub.path, `checkpoint has [${shape.join(", ")}], the model needs [${arr.length}]`, name);
      const { bytes, info, file } = hub.readElements(name, 0, n);
      const dec = decodeTensor(bytes, { ...info, shape: [n], numel: n }, file);
      if (dec.dtype !== "f32") throw new SafetensorsError(file, `holds integers (${info.dtype}); a buffer needs a floating dtype`, name);
      arr.set(dec.data as Float32Array);
      reads++;
    }
    for (const h of engine.units()) if (!mastered.has(h)) await engine.initMaster(h);
    const n = plan.unexpected.length;
    const warning = n === 0 ? null : `${hub.path}: ${n} tensor${n === 1 ? "" : "s"} of the checkpoint ${n === 1 ? "is" : "are"} not used by the ${engine.job.config.model.model_type} model: ${listNames(plan.unexpected)}`;
    return { reads, elements, unexpected: plan.unexpected, warning };
  } finally {
    hub.close();
  }
}
