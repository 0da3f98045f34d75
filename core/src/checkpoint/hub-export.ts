/**
 * Writing a Hugging Face Hub checkpoint directory as Transformers' `save_pretrained` does with
 * `max_shard_size` (its `split_torch_state_dict_into_shards`): tensors in order are packed into
 * shards of at most `maxShardBytes` each — a tensor that does not fit in the current shard starts
 * the next one; a single tensor larger than the limit gets a shard of its own — named
 * `model-0000k-of-0000n.safetensors`, with `model.safetensors.index.json`
 * (`{"metadata": {"total_size": bytes}, "weight_map": {name: file}}`). With one shard the file is
 * `model.safetensors` and no index is written (as Transformers). `config.json` is written by the
 * caller (hf-config.ts). The directory reads back with `--init-from DIR` (hub-dir.ts) and with
 * Transformers' `from_pretrained`.
 *
 * Streaming: tensors are written whole, in the order of the specs, each into its shard's
 * SafetensorsWriter (one open file at a time; each renamed into place when complete); `finish`
 * writes the index last.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SAFETENSORS_DTYPE_BYTES, SafetensorsError, SafetensorsWriter, type SafetensorsTensorSpec } from "./safetensors.ts";

/** The index file name Transformers reads. */
export const HUB_EXPORT_INDEX = "model.safetensors.index.json";

/** One planned shard: its file name and the tensors it holds, in order. */
export interface HubShardPlan {
  file: string;
  tensors: SafetensorsTensorSpec[];
  bytes: number;
}

/** Bytes of one tensor's data. */
function tensorBytes(t: SafetensorsTensorSpec): number {
  return t.shape.reduce((a, b) => a * b, 1) * SAFETENSORS_DTYPE_BYTES[t.dtype];
}

/**
 * Split `specs` (in order) into shards of at most `maxShardBytes` (module comment).
 * @throws RangeError for a limit that is not a positive integer
 */
export function planHubShards(specs: readonly SafetensorsTensorSpec[], maxShardBytes: number): HubShardPlan[] {
  if (!Number.isSafeInteger(maxShardBytes) || maxShardBytes <= 0) throw new RangeError(`max shard size must be a positive number of bytes, got ${maxShardBytes}`);
  const groups: { tensors: SafetensorsTensorSpec[]; bytes: number }[] = [];
  let cur: { tensors: SafetensorsTensorSpec[]; bytes: number } | null = null;
  for (const t of specs) {
    const b = tensorBytes(t);
    if (!cur || (cur.tensors.length > 0 && cur.bytes + b > maxShardBytes)) {
      cur = { tensors: [], bytes: 0 };
      groups.push(cur);
    }
    cur.tensors.push(t);
    cur.bytes += b;
  }
  if (groups.length === 0) groups.push({ tensors: [], bytes: 0 });
  const n = groups.length;
  const pad = (k: number) => String(k).padStart(5, "0");
  return groups.map((g, i) => ({ ...g, file: n === 1 ? "model.safetensors" : `model-${pad(i + 1)}-of-${pad(n)}.safetensors` }));
}

/** A Hub directory being written (module comment). */
export class HubDirWriter {
  readonly dir: string;
  readonly shards: readonly HubShardPlan[];
  private readonly shardOf = new Map<string, number>();
  private readonly metadata: Readonly<Record<string, string>> | null;
  private current = -1;
  private writer: SafetensorsWriter | null = null;
  private left = 0;
  /** Shards finished by this writer (removed again by {@link abort}). */
  private readonly finished: string[] = [];

  private constructor(dir: string, shards: HubShardPlan[], metadata: Readonly<Record<string, string>> | null) {
    this.dir = dir;
    this.shards = shards;
    this.metadata = metadata;
    shards.forEach((s, i) => s.tensors.forEach((t) => this.shardOf.set(t.name, i)));
  }

  /**
   * Plan the shards of `specs` and create `dir` (recursively).
   * @param metadata the safetensors `__metadata__` of every shard (e.g. `{format: "pt"}`)
   * @throws RangeError for a bad limit; SafetensorsError for duplicate tensor names; fs errors
   */
  static create(dir: string, specs: readonly SafetensorsTensorSpec[], maxShardBytes: number, metadata: Readonly<Record<string, string>> | null = { format: "pt" }): HubDirWriter {
    const names = new Set<string>();
    for (const s of specs) {
      if (names.has(s.name)) throw new SafetensorsError(dir, `tensor ${s.name} is listed twice`, s.name);
      names.add(s.name);
    }
    mkdirSync(dir, { recursive: true });
    return new HubDirWriter(dir, planHubShards(specs, maxShardBytes), metadata);
  }

  /** Write tensor `name` whole; tensors must come in the order of the specs.
   * @throws SafetensorsError for an unknown tensor, one out of order, or the wrong byte count */
  writeTensor(name: string, data: ArrayBufferView): void {
    const i = this.shardOf.get(name);
    if (i === undefined) throw new SafetensorsError(this.dir, `writeTensor: ${name} is not one of the planned tensors`, name);
    if (i !== this.current) {
      if (i < this.current || (this.writer && this.left > 0)) throw new SafetensorsError(this.dir, `writeTensor: ${name} (shard ${i + 1}) written out of order`, name);
      this.closeCurrent();
      this.current = i;
      const s = this.shards[i]!;
      this.writer = SafetensorsWriter.create(join(this.dir, s.file), s.tensors, this.metadata);
      this.left = s.tensors.length;
    }
    this.writer!.writeTensor(name, data);
    this.left--;
  }

  private closeCurrent(): void {
    if (this.writer) {
      this.writer.finish();
      this.finished.push(this.writer.path);
      this.writer = null;
    }
  }

  /** Close the last shard (shards with no tensor are written empty) and write the index when there
   * are several shards. @returns the files written, index last. @throws when a tensor is missing */
  finish(): string[] {
    this.closeCurrent();
    for (let i = this.current + 1; i < this.shards.length; i++) {
      const s = this.shards[i]!;
      if (s.tensors.length > 0) throw new SafetensorsError(this.dir, `finish: shard ${s.file} was never written (tensor ${s.tensors[0]!.name} missing)`);
      SafetensorsWriter.create(join(this.dir, s.file), [], this.metadata).finish();
      this.finished.push(join(this.dir, s.file));
    }
    const files = this.shards.map((s) => s.file);
    if (this.shards.length > 1) {
      const weightMap: Record<string, string> = {};
      for (const s of this.shards) for (const t of s.tensors) weightMap[t.name] = s.file;
      const total = this.shards.reduce((a, s) => a + s.bytes, 0);
      const path = join(this.dir, HUB_EXPORT_INDEX);
      writeFileSync(`${path}.tmp`, `${JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2)}\n`);
      renameSync(`${path}.tmp`, path);
      this.finished.push(path);
      files.push(HUB_EXPORT_INDEX);
    }
    return files;
  }

  /** Drop the shard being written and remove every file this writer finished (shards, and the
   * index when {@link finish} ran: a caller that fails afterwards, writing config.json, aborts too),
   * so a failed export leaves no partial directory that looks like a model (zero-to-fp32
   * --max-shard-size failing on a damaged record left 5 of 7 shards and no index). The directory
   * itself stays. */
  abort(): void {
    this.writer?.abort();
    this.writer = null;
    for (const f of this.finished.splice(0)) rmSync(f, { force: true });
    rmSync(join(this.dir, `${HUB_EXPORT_INDEX}.tmp`), { force: true });
  }
}
