/**
 * Checks of the paths a command will write to, made before any work, so that a run does not train
 * for an hour and then fail (with an fs stack trace) to write its summary or first checkpoint.
 * Each returns a sentence saying what is wrong with the path, or null when it can be used.
 */
import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";

/** The nearest existing ancestor folder of `abs` (an absolute path), or `abs` itself if it exists. */
function nearestExisting(abs: string): string {
  let p = abs;
  while (!existsSync(p)) {
    const up = dirname(p);
    if (up === p) break;
    p = up;
  }
  return p;
}

/**
 * Why the file `path` cannot be written, or null. A missing parent folder is fine when it can be
 * created (the nearest existing ancestor is a writable folder); `path` must not be a folder.
 * @param createsParents whether the writer creates missing folders (else the parent must exist).
 */
export function fileOutputProblem(path: string, createsParents: boolean): string | null {
  const abs = resolve(path);
  if (existsSync(abs) && statSync(abs).isDirectory()) {
    return `${path} is a directory; expected a file path`;
  }
  const parent = dirname(abs);
  if (!createsParents && !existsSync(parent)) return `directory ${parent} does not exist`;
  const base = nearestExisting(parent);
  if (!statSync(base).isDirectory()) return `${base} is not a directory`;
  try {
    accessSync(base, constants.W_OK);
  } catch {
    return `directory ${base} is not writable`;
  }
  return null;
}

/**
 * Create the folder `path` with its parents if missing and check that it is a writable folder;
 * returns why it cannot be used, or null.
 */
export function ensureOutputDir(path: string): string | null {
  const abs = resolve(path);
  if (existsSync(abs) && !statSync(abs).isDirectory()) return `${abs} exists and is not a directory`;
  try {
    mkdirSync(abs, { recursive: true });
    accessSync(abs, constants.W_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return `cannot create or write directory ${abs}${code ? ` (${code})` : ""}`;
  }
  return null;
}
