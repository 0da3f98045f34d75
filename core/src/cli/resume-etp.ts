/**
 * `--resume` at another `moe.etp_size` than the checkpoint's: refused before any rank starts
 * (exit 2), as the MoE plugin refuses it on restore (plugins/moe/src/index.ts; expert slices are
 * not resharded across etp sizes, docs/moe.md "Expert tensor parallelism"). The checkpoint's
 * etp_size is its manifest's `plugins.moe.etp_size` (absent: 1).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { locateCheckpoint, readManifest } from "../checkpoint/manifest.ts";

/**
 * The problem with resuming `resume` (a checkpoint root, tag directory, or a tag under
 * `checkpointDir`) at `etpSize`, or null when the sizes agree or the manifest cannot be read (the
 * resume itself then reports it).
 */
export function resumeEtpProblem(resume: string, etpSize: number, checkpointDir: string | null): string | null {
  let saved: number;
  let tagDir: string;
  try {
    const bare = !existsSync(resume) && checkpointDir !== null && /^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(resume) && existsSync(join(checkpointDir, resume, "manifest.json"));
    const loc = bare ? locateCheckpoint(checkpointDir!, resume) : locateCheckpoint(resume);
    tagDir = loc.tagDir;
    const moe = (readManifest(loc.tagDir).plugins as Record<string, { etp_size?: unknown } | undefined> | null)?.moe;
    saved = typeof moe?.etp_size === "number" ? moe.etp_size : 1;
  } catch {
    return null;
  }
  if (saved === etpSize) return null;
  return `moe.etp_size: checkpoint ${tagDir} was saved with etp_size ${saved}, the job has ${etpSize}; expert slices are not resharded across etp sizes (resume with --set moe.etp_size=${saved})`;
}
