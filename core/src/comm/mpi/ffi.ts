/**
 * Open MPI's C API through `bun:ffi`: the library is opened once per process, its functions bound
 * with their C signatures (MPI-3.1 standard, Open MPI 4.1's mpi.h), and its predefined handles
 * resolved as the addresses of the exported globals Open MPI defines them as
 * (`MPI_COMM_WORLD` is `&ompi_mpi_comm_world`, `MPI_BYTE` is `&ompi_mpi_byte`, …), looked up with
 * the C library's `dlsym`. No handle value is guessed.
 *
 * Why libmpi is first opened with `dlopen(RTLD_NOW | RTLD_GLOBAL)` through libc: Open MPI loads
 * its components (transports, collectives) as plugins that expect libmpi's symbols to be global,
 * as `mpicc`-linked programs have them; bun:ffi's own dlopen loads the library locally. The Open
 * MPI FAQ gives the same advice for Python's ctypes ("use RTLD_GLOBAL").
 *
 * The few plain constants used are the values Open MPI's mpi.h defines (checked against the
 * installed mpi.h by core/test/comm/mpi/constants.test.ts when the header is present):
 * MPI_SUCCESS 0, MPI_THREAD_FUNNELED 1, MPI_STATUS(ES)_IGNORE the null pointer.
 */

import { CString, dlopen, FFIType, ptr, type Pointer } from "@zeromoe/kernels/runtime/ffi";

/** Library names tried in order (env ZEROMOE_MPI_LIB first when set). */
const LIB_NAMES = ["libmpi.so.40", "libmpi.so", "libmpi.dylib", "libmpi.40.dylib"];

/** MPI_SUCCESS (mpi.h). */
export const MPI_SUCCESS = 0;
/** MPI_THREAD_FUNNELED (mpi.h: the enum SINGLE 0, FUNNELED 1, SERIALIZED 2, MULTIPLE 3). */
export const MPI_THREAD_FUNNELED = 1;
/** MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE: `((MPI_Status *) 0)` in Open MPI's mpi.h. */
export const STATUS_IGNORE = null;

const RTLD_NOW = 2;
const RTLD_GLOBAL = 0x100;

const P = FFIType.ptr;
const I = FFIType.i32;

/** C signatures of the MPI functions used (all return an MPI error code, `int`). */
const SYMBOLS = {
  MPI_Initialized: { args: [P], returns: I },
  MPI_Finalized: { args: [P], returns: I },
  MPI_Init_thread: { args: [P, P, I, P], returns: I },
  MPI_Finalize: { args: [], returns: I },
  MPI_Abort: { args: [P, I], returns: I },
  MPI_Comm_rank: { args: [P, P], returns: I },
  MPI_Comm_size: { args: [P, P], returns: I },
  MPI_Comm_dup: { args: [P, P], returns: I },
  MPI_Comm_free: { args: [P], returns: I },
  MPI_Comm_set_errhandler: { args: [P, P], returns: I },
  MPI_Comm_group: { args: [P, P], returns: I },
  MPI_Group_incl: { args: [P, I, P, P], returns: I },
  MPI_Group_free: { args: [P], returns: I },
  MPI_Comm_create_group: { args: [P, P, I, P], returns: I },
  MPI_Error_string: { args: [I, P, P], returns: I },
  MPI_Get_library_version: { args: [P, P], returns: I },
  MPI_Isend: { args: [P, I, P, I, I, P, P], returns: I },
  MPI_Irecv: { args: [P, I, P, I, I, P, P], returns: I },
  MPI_Testall: { args: [I, P, P, P], returns: I },
  MPI_Cancel: { args: [P], returns: I },
  MPI_Request_free: { args: [P], returns: I },
  MPI_Alltoallv: { args: [P, P, P, P, P, P, P, P, P], returns: I },
  MPI_Allgatherv: { args: [P, I, P, P, P, P, P, P], returns: I },
  MPI_Allgather: { args: [P, I, P, P, I, P, P], returns: I },
  MPI_Bcast: { args: [P, I, P, I, P], returns: I },
  MPI_Gatherv: { args: [P, I, P, P, P, P, P, I, P], returns: I },
  MPI_Scatterv: { args: [P, P, P, P, P, I, P, I, P], returns: I },
  MPI_Barrier: { args: [P], returns: I },
  // the non-blocking collectives (MPI-3): the same arguments and an MPI_Request* last
  MPI_Ialltoallv: { args: [P, P, P, P, P, P, P, P, P, P], returns: I },
  MPI_Iallgatherv: { args: [P, I, P, P, P, P, P, P, P], returns: I },
  MPI_Iallgather: { args: [P, I, P, P, I, P, P, P], returns: I },
  MPI_Ibcast: { args: [P, I, P, I, P, P], returns: I },
  MPI_Igatherv: { args: [P, I, P, P, P, P, P, I, P, P], returns: I },
  MPI_Iscatterv: { args: [P, P, P, P, P, I, P, I, P, P], returns: I },
} as const;

const LIBC_SYMBOLS = {
  dlopen: { args: [P, I], returns: P },
  dlsym: { args: [P, P], returns: P },
  dlerror: { args: [], returns: P },
  sched_yield: { args: [], returns: I },
} as const;

type MpiSymbols = ReturnType<typeof dlopen<typeof SYMBOLS>>["symbols"];

/** The bound library: functions plus the predefined handles (addresses of Open MPI's globals). */
export interface MpiLib {
  /** Path or soname the library was opened under. */
  readonly path: string;
  readonly fn: MpiSymbols;
  /** Predefined handles: `&ompi_mpi_comm_world`, `&ompi_mpi_byte`, `&ompi_mpi_errors_return`, … */
  readonly COMM_WORLD: Pointer;
  readonly BYTE: Pointer;
  readonly INT: Pointer;
  readonly ERRORS_RETURN: Pointer;
  /** libc sched_yield(): lets another process run while a rank polls. */
  readonly yieldCpu: () => void;
}

let cached: MpiLib | null = null;
let loadError: string | null = null;

function cstr(s: string): Buffer {
  return Buffer.from(s + "\0", "utf8");
}

/** What to install when Open MPI is missing (used in error messages). */
export const MPI_INSTALL_HINT =
  "install Open MPI (Debian/Ubuntu: `apt-get install -y openmpi-bin libopenmpi-dev`, or `ZEROMOE_WITH_MPI=1 bash scripts/setup.sh`)";

/**
 * Open and bind Open MPI's libmpi once per process. Returns null (and remembers why, see
 * {@link mpiLoadError}) when the library or one of its globals cannot be found.
 */
export function tryLoadMpi(): MpiLib | null {
  if (cached || loadError) return cached;
  let libc: ReturnType<typeof dlopen<typeof LIBC_SYMBOLS>>;
  try {
    libc = dlopen(process.platform === "darwin" ? "libSystem.B.dylib" : "libc.so.6", LIBC_SYMBOLS);
  } catch (e) {
    loadError = `cannot open the C library to load libmpi: ${(e as Error).message}`;
    return null;
  }
  const names = process.env.ZEROMOE_MPI_LIB ? [process.env.ZEROMOE_MPI_LIB, ...LIB_NAMES] : LIB_NAMES;
  let handle: Pointer | null = null;
  let path = "";
  const tried: string[] = [];
  for (const n of names) {
    handle = libc.symbols.dlopen(cstr(n), RTLD_NOW | RTLD_GLOBAL) as Pointer | null;
    if (handle) {
      path = n;
      break;
    }
    const err = libc.symbols.dlerror();
    tried.push(err ? new CString(err).toString() : n);
  }
  if (!handle) {
    loadError = `Open MPI's libmpi was not found (${tried.join("; ")}); ${MPI_INSTALL_HINT}`;
    return null;
  }
  const sym = (name: string): Pointer => {
    const p = libc.symbols.dlsym(handle, cstr(name)) as Pointer | null;
    if (!p) throw new Error(`${path} does not export ${name}: not Open MPI? (the mpi transport needs Open MPI 4 or 5)`);
    return p;
  };
  try {
    const lib = dlopen(path, SYMBOLS);
    cached = {
      path,
      fn: lib.symbols,
      COMM_WORLD: sym("ompi_mpi_comm_world"),
      BYTE: sym("ompi_mpi_byte"),
      INT: sym("ompi_mpi_int"),
      ERRORS_RETURN: sym("ompi_mpi_errors_return"),
      yieldCpu: () => void libc.symbols.sched_yield(),
    };
  } catch (e) {
    loadError = (e as Error).message;
    return null;
  }
  return cached;
}

/** Why {@link tryLoadMpi} returned null (null when it did not). */
export function mpiLoadError(): string | null {
  return loadError;
}

/** {@link tryLoadMpi}, throwing its reason when Open MPI cannot be loaded. */
export function loadMpi(): MpiLib {
  const lib = tryLoadMpi();
  if (!lib) throw new Error(`mpi transport: ${loadError}`);
  return lib;
}

/** Text of an MPI error code (MPI_Error_string). */
export function mpiErrorString(lib: MpiLib, code: number): string {
  const buf = new Uint8Array(1024);
  const len = new Int32Array(1);
  if (lib.fn.MPI_Error_string(code, buf, len) !== MPI_SUCCESS) return `MPI error ${code}`;
  return new TextDecoder().decode(buf.subarray(0, len[0]));
}

/** Open MPI's version line (MPI_Get_library_version), e.g. "Open MPI v4.1.4, …". */
export function mpiLibraryVersion(lib: MpiLib): string {
  const buf = new Uint8Array(8192);
  const len = new Int32Array(1);
  lib.fn.MPI_Get_library_version(buf, len);
  return new TextDecoder().decode(buf.subarray(0, Math.max(0, len[0] - (buf[len[0] - 1] === 0 ? 1 : 0)))).split("\n")[0]!.trim();
}

/** Read a pointer-sized output (an MPI handle written through `T*`). */
export function handleOut(): BigUint64Array {
  return new BigUint64Array(1);
}

/** The handle stored in a {@link handleOut} buffer, as the number bun:ffi passes for pointers. */
export function handleValue(b: BigUint64Array): Pointer {
  return Number(b[0]) as Pointer;
}

export { ptr };
