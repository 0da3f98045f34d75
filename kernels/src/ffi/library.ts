/**
 * Locating wgpu-native on disk: the shared library and the C headers (webgpu.h, wgpu.h) the shim
 * is compiled against.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

/** The wgpu-native release this binding is written against (webgpu.h of that release). */
export const WGPU_NATIVE_VERSION = "29.0.1.1";

/** Where the library and its headers were found. */
export interface LibraryLocation {
  /** Absolute path of libwgpu_native.so. */
  libraryPath: string;
  /** Folder holding webgpu.h and wgpu.h. */
  headerDir: string;
}

/** Thrown when libwgpu_native.so (or its headers) cannot be found; lists every path tried. */
export class WgpuLibraryNotFoundError extends Error {
  /** The paths that were tried, in order. */
  readonly tried: string[];
  constructor(what: string, tried: string[]) {
    super(
      `wgpu-native ${what} not found. Tried:\n  ${tried.join("\n  ")}\n` +
        `Run \`bash scripts/setup.sh\` to fetch wgpu-native ${WGPU_NATIVE_VERSION}, or set WGPU_NATIVE_LIB ` +
        `to the path of libwgpu_native.so (with webgpu.h and wgpu.h beside it, or in WGPU_NATIVE_INCLUDE).`,
    );
    this.name = "WgpuLibraryNotFoundError";
    this.tried = tried;
  }
}

/** The default cache folder: `$ZEROMOE_CACHE/wgpu-native/<version>` or `~/.cache/zeromoe/...`. */
export function defaultLibraryDir(): string {
  const cache = process.env.ZEROMOE_CACHE || join(homedir(), ".cache", "zeromoe");
  return join(cache, "wgpu-native", WGPU_NATIVE_VERSION);
}

/**
 * Resolve the library path: `libraryPath` option, else env `WGPU_NATIVE_LIB` (either one, when given,
 * is the only path tried), else
 * `$ZEROMOE_CACHE` (default `~/.cache/zeromoe`) `/wgpu-native/29.0.1.1/libwgpu_native.so`.
 * Headers (needed at run time: the shim is compiled then) are looked for in env
 * `WGPU_NATIVE_INCLUDE` when set, else beside the library, then in the default cache folder.
 * @throws WgpuLibraryNotFoundError naming every path tried and `bash scripts/setup.sh`.
 */
export function resolveLibrary(libraryPath?: string): LibraryLocation {
  const tried: string[] = [];
  const candidates: string[] = [];
  // An explicit choice (option or env) is the only candidate: never silently use another library.
  if (libraryPath) candidates.push(libraryPath);
  else if (process.env.WGPU_NATIVE_LIB) candidates.push(process.env.WGPU_NATIVE_LIB);
  else candidates.push(join(defaultLibraryDir(), "libwgpu_native.so"));
  let found: string | null = null;
  for (const c of candidates) {
    tried.push(c);
    if (existsSync(c)) {
      found = c;
      break;
    }
  }
  if (!found) throw new WgpuLibraryNotFoundError("library (libwgpu_native.so)", tried);
  const headerTried: string[] = [];
  const headerDirs = process.env.WGPU_NATIVE_INCLUDE ? [process.env.WGPU_NATIVE_INCLUDE] : [dirname(found), defaultLibraryDir()];
  for (const dir of headerDirs) {
    headerTried.push(join(dir, "webgpu.h"));
    if (existsSync(join(dir, "webgpu.h")) && existsSync(join(dir, "wgpu.h"))) return { libraryPath: found, headerDir: dir };
  }
  throw new WgpuLibraryNotFoundError("headers (webgpu.h, wgpu.h)", headerTried);
}
