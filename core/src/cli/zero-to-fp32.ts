/**
 * `bun run zero-to-fp32 <checkpoint-dir> <out.safetensors> [--tag TAG]`: consolidate a sharded
 * ZeroMoE checkpoint into one fp32 safetensors file with Hugging Face names
 * (core/src/checkpoint/consolidate.ts), streaming unit by unit. `<checkpoint-dir>` is a checkpoint
 * root (its `latest` tag, or `--tag`) or a tag directory.
 *
 * Exit status: 0 on success, 2 for a usage error or a damaged/missing checkpoint (the message names
 * the file and record), 1 otherwise (a full disk, quota or read-only file system: one line naming
 * the file, no stack).
 */
import { zeroToFp32 } from "../checkpoint/consolidate.ts";
import { CheckpointError, CheckpointWriteError } from "../checkpoint/errors.ts";
import { SafetensorsError } from "../checkpoint/safetensors.ts";
import { ConfigError } from "../config/errors.ts";
import { existsSync, statSync } from "node:fs";
import { parseByteSize } from "../config/byte-size.ts";
import { fileOutputProblem } from "./output-paths.ts";

/** System error codes of a write the environment refused (Node's messages name the path). */
const WRITE_SYSTEM_ERROR = /^(ENOSPC|EDQUOT|EROFS|EIO|EACCES|EPERM|EFBIG)$/;

/** Usage text. */
export const ZERO_TO_FP32_USAGE = `usage: bun run zero-to-fp32 <checkpoint-dir> <out.safetensors> [--tag TAG]
       bun run zero-to-fp32 <checkpoint-dir> <out-dir> --max-shard-size SIZE [--tag TAG]   (a Hugging Face Hub directory: config.json, shards of at most SIZE such as 5GB or 500MiB, index)`;

/** Run with `argv` (without runtime and script); returns the exit status. */
export function main(argv: readonly string[]): number {
  const pos: string[] = [];
  let tag: string | undefined;
  let maxShardSize: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--help" || a === "-h") {
      console.log(ZERO_TO_FP32_USAGE);
      return 0;
    }
    if (a === "--max-shard-size") {
      const v = argv[++i];
      const b = v === undefined ? "a value" : parseByteSize(v);
      if (typeof b === "string") {
        console.error(`error: --max-shard-size: ${v === undefined ? "needs a value" : b}\n${ZERO_TO_FP32_USAGE}`);
        return 2;
      }
      maxShardSize = b;
    } else if (a === "--tag") {
      tag = argv[++i];
      if (tag === undefined) {
        console.error(`error: --tag needs a value\n${ZERO_TO_FP32_USAGE}`);
        return 2;
      }
    } else if (a.startsWith("-")) {
      console.error(`error: unknown option ${a}\n${ZERO_TO_FP32_USAGE}`);
      return 2;
    } else pos.push(a);
  }
  if (pos.length !== 2) {
    console.error(`error: expected <checkpoint-dir> and <out.safetensors>, got ${pos.length} argument(s)\n${ZERO_TO_FP32_USAGE}`);
    return 2;
  }
  if (maxShardSize === undefined) {
    const outProblem = fileOutputProblem(pos[1]!, false);
    if (outProblem !== null) {
      console.error(`error: <out.safetensors> ${pos[1]}: ${outProblem}\n${ZERO_TO_FP32_USAGE}`);
      return 2;
    }
  } else if (existsSync(pos[1]!) && !statSync(pos[1]!).isDirectory()) {
    console.error(`error: <out-dir> ${pos[1]} exists and is not a directory\n${ZERO_TO_FP32_USAGE}`);
    return 2;
  }
  try {
    const r = zeroToFp32(pos[0]!, pos[1]!, tag, { maxShardSize });
    console.log(`wrote ${pos[1]}: ${r.tensors} tensors, ${r.numel} parameters (fp32 from ${r.source}, tag ${r.tag}, largest unit ${r.largestUnit} elements)${maxShardSize !== undefined ? " as a Hub directory" : ""} in ${r.seconds.toFixed(2)} s`);
    return 0;
  } catch (e) {
    if (e instanceof CheckpointError || e instanceof ConfigError || e instanceof SafetensorsError) {
      console.error(`error: ${e.message}`);
      return 2;
    }
    // the environment (disk full, quota, read-only file system): the message names the file
    if (e instanceof CheckpointWriteError || WRITE_SYSTEM_ERROR.test(String((e as NodeJS.ErrnoException)?.code))) {
      console.error(`error: ${(e as Error).message}`);
      return 1;
    }
    console.error(`error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return 1;
  }
}

if (import.meta.main) process.exit(main(process.argv.slice(2)));
