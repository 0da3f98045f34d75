/**
 * Locating wgpu-native on disk: the shared library and the C headers (webgpu.h, wgpu.h) the shim
 * is compiled against.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

/** The wgpu-native release this binding is written against (webgpu.h of that release). */
export const WGPU_NATIVE_VERSION = "29.0.1.1";

/** The version of our own library (native/wgpu-coop: the wgpu crate it is built on), as
 * wgpuGetVersion reports it. */
export const ZM_WGPU_VERSION = "30.0.2.0";

/** Where the library and its headers were found. */
export interface LibraryLocation {
  /** Absolute path of libwgpu_native.so (or of our libzm_wgpu.so). */
  libraryPath: string;
  /** Folder holding webgpu.h and wgpu.h. */
  headerDir: string;
  /** How the library was chosen: "option", "WGPU_NATIVE_LIB", "ZEROMOE_WGPU=coop" or "default". */
  selectedBy: string;
}

/** Values of env `ZEROMOE_WGPU`: "native" (default: the prebuilt wgpu-native) or "coop" (our
 * native/wgpu-coop library on the wgpu 30 crate, which can enable `wgpu-cooperative-matrix`). */
export type WgpuSelection = "native" | "coop";

/** Thrown for a bad `ZEROMOE_WGPU` value (the message names the variable and the accepted values). */
export class WgpuSelectionError extends Error {
  constructor(value: string) {
    super(`ZEROMOE_WGPU=${JSON.stringify(value)} is not a library selection; expected "native" (prebuilt wgpu-native, the default) or "coop" (native/wgpu-coop, built by \`ZEROMOE_WITH_COOP=1 bash scripts/setup.sh\`)`);
    this.name = "WgpuSelectionError";
  }
}

/** The library selection from env `ZEROMOE_WGPU` (unset or empty = "native").
 * @throws WgpuSelectionError for any other value. */
export function wgpuSelection(): WgpuSelection {
  const v = process.env.ZEROMOE_WGPU ?? "";
  if (v === "" || v === "native") return "native";
  if (v === "coop") return "coop";
  throw new WgpuSelectionError(v);
}

/** Where `bash scripts/setup.sh` installs our library: `$ZEROMOE_CACHE/zm-wgpu/libzm_wgpu.so`
 * (default cache `~/.cache/zeromoe`). */
export function coopLibraryCachePath(): string {
  const cache = process.env.ZEROMOE_CACHE || join(homedir(), ".cache", "zeromoe");
  return join(cache, "zm-wgpu", "libzm_wgpu.so");
}

/** The cargo build output of native/wgpu-coop in this checkout. */
export function coopLibraryBuildPath(): string {
  return join(import.meta.dirname, "..", "..", "..", "native", "wgpu-coop", "target", "release", "libzm_wgpu.so");
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
 * is the only path tried), else with env `ZEROMOE_WGPU=coop` our library ({@link coopLibraryBuildPath},
 * then {@link coopLibraryCachePath}), else
 * `$ZEROMOE_CACHE` (default `~/.cache/zeromoe`) `/wgpu-native/29.0.1.1/libwgpu_native.so`.
 * Headers (needed at run time: the shim is compiled then) are looked for in env
 * `WGPU_NATIVE_INCLUDE` when set, else beside the library, then in the default cache folder.
 * @throws WgpuLibraryNotFoundError naming every path tried and `bash scripts/setup.sh`.
 * @throws WgpuSelectionError for a bad `ZEROMOE_WGPU`.
 */
export function resolveLibrary(libraryPath?: string): LibraryLocation {
  const tried: string[] = [];
  const candidates: string[] = [];
  let selectedBy = "default";
  // An explicit choice (option or env) is the only candidate: never silently use another library.
  if (libraryPath) {
    candidates.push(libraryPath);
    selectedBy = "option";
  } else if (process.env.WGPU_NATIVE_LIB) {
    candidates.push(process.env.WGPU_NATIVE_LIB);
    selectedBy = "WGPU_NATIVE_LIB";
  } else if (wgpuSelection() === "coop") {
    // the checkout's own build first (fresh after a `cargo build`), then set-up's cached copy
    candidates.push(coopLibraryBuildPath(), coopLibraryCachePath());
    selectedBy = "ZEROMOE_WGPU=coop";
  } else candidates.push(join(defaultLibraryDir(), "libwgpu_native.so"));
  let found: string | null = null;
  for (const c of candidates) {
    tried.push(c);
    if (existsSync(c)) {
      found = c;
      break;
    }
  }
  if (!found) {
    if (selectedBy === "ZEROMOE_WGPU=coop") throw new WgpuLibraryNotFoundError("library (libzm_wgpu.so, selected by ZEROMOE_WGPU=coop; build it with `ZEROMOE_WITH_COOP=1 bash scripts/setup.sh`)", tried);
    throw new WgpuLibraryNotFoundError("library (libwgpu_native.so)", tried);
  }
  const headerTried: string[] = [];
  const headerDirs = process.env.WGPU_NATIVE_INCLUDE ? [process.env.WGPU_NATIVE_INCLUDE] : [dirname(found), defaultLibraryDir()];
  for (const dir of headerDirs) {
    headerTried.push(join(dir, "webgpu.h"));
    if (existsSync(join(dir, "webgpu.h")) && existsSync(join(dir, "wgpu.h"))) return { libraryPath: found, headerDir: dir, selectedBy };
  }
  throw new WgpuLibraryNotFoundError("headers (webgpu.h, wgpu.h)", headerTried);
}
