/**
 * `bun run train --resume`: refuses, before any rank starts, a resume whose checkpoint is already at
 * or past the job's `steps` (a resumed run trains steps s+1 … steps, so there would be nothing to
 * train and the result line would read "done 0 steps (11–10 of 5)").
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { locateCheckpoint, readManifest } from "../checkpoint/manifest.ts";

/**
 * The problem with resuming `resume` for a job of `steps` optimizer steps, or null when there is none.
 * `resume` is resolved like `Engine.loadCheckpoint` does: a tag directory, a checkpoint root (its
 * `latest`), or a bare tag name under `checkpointDir`. A checkpoint that cannot be found or read
 * gives null here: the ranks' load reports that (CheckpointError naming the file).
 * @param stepsSource how the user set `steps`, for the message ("--steps" or "steps").
 */
export function resumeStepsProblem(resume: string, steps: number, checkpointDir: string | null, stepsSource: string): string | null {
  let globalSteps: number;
  let tagDir: string;
  try {
    const bare = !existsSync(resume) && checkpointDir !== null && /^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(resume) && existsSync(join(checkpointDir, resume, "manifest.json"));
    const loc = bare ? locateCheckpoint(checkpointDir!, resume) : locateCheckpoint(resume);
    tagDir = loc.tagDir;
    globalSteps = readManifest(loc.tagDir).global_steps;
  } catch {
    return null;
  }
  if (globalSteps < steps) return null;
  return `--resume: checkpoint ${tagDir} is at step ${globalSteps}, ${stepsSource} ${steps} leaves nothing to train (give ${stepsSource} above ${globalSteps})`;
}
