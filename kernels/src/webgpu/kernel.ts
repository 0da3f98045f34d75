/**
 * Kernel descriptions and their assembly into a complete WGSL module.
 *
 * A {@link Kernel} names its storage buffers and uniform parameters; its `code` refers to buffers by
 * name (identifiers starting `b_`) and to parameters as `P.<name>`. {@link assembleWgsl} adds the
 * prelude, the `Params` uniform struct at binding 0 and the buffer declarations at bindings 1…k.
 *
 * Aliasing: WebGPU forbids binding one buffer twice in a dispatch when either binding is writable
 * (a usage-scope conflict). Views into one flat buffer are normal in this engine (a unit's params
 * are views into one buffer), so when several logical buffers resolve to the same GPUBuffer they are
 * merged into one binding: the later names are rewritten to the first one in the code, and the
 * binding is read_write if any of them is written. The element offsets (passed as parameters) keep
 * the views apart.
 */
import type { Buf } from "../backend.ts";
import { PRELUDE } from "../wgsl/prelude.ts";

/** How a buffer is declared in WGSL: typed f32/i32/u32 arrays, `w16` = packed 16-bit words
 * (`array<u32>`), `atomic` = `array<atomic<u32>>`; for the tensor-core kernels' f16 operands
 * (kernels/src/wgsl/matmul-coop-wgsl.ts) `f16` = `array<f16>`, `f16x4` = `array<vec4<f16>>` (the
 * module must `enable f16;`), `u32x4` = `array<vec4<u32>>` and `f16x8` = `array<mat2x4<f16>>`
 * (8- and 16-byte loads; the bound range must be a multiple of the vector's size for the last
 * vector to be in range). */
export type BindType = "f32" | "i32" | "u32" | "w16" | "atomic" | "f16" | "f16x4" | "u32x4" | "f16x8";

/** One storage buffer of a kernel. */
export interface BufferDecl {
  /** WGSL identifier, must start with `b_`. */
  name: string;
  type: BindType;
  /** true when the kernel writes it. */
  write: boolean;
}

/** One scalar uniform parameter. */
export interface ParamDecl {
  name: string;
  type: "u32" | "i32" | "f32";
}

/** A compute kernel: buffers, params, WGSL code (helpers + `@compute fn main`), workgroup size. */
export interface Kernel {
  /** Human-readable label (appears in pipeline labels and error messages). */
  label: string;
  buffers: readonly BufferDecl[];
  params: readonly ParamDecl[];
  /** WGSL: functions and the `@compute @workgroup_size(...) fn main(...)` entry point; `enable`
   * directives (lines of their own) are moved to the top of the assembled module. */
  code: string;
}

/** Result of {@link assembleWgsl}: source plus, per binding slot (1…k), the access mode. */
export interface AssembledKernel {
  source: string;
  /** For each distinct binding after merging: whether it is writable. Index 0 ↔ binding 1. */
  slots: { write: boolean }[];
  /** For each entry of `kernel.buffers`, the slot index (0-based) it was merged into. */
  slotOf: number[];
}

/** Largest number of 4-byte parameters a kernel may take (one 256-byte uniform slot). */
export const MAX_PARAMS = 64;

function wgslArrayType(t: BindType): string {
  switch (t) {
    case "f32":
      return "array<f32>";
    case "i32":
      return "array<i32>";
    case "u32":
    case "w16":
      return "array<u32>";
    case "atomic":
      return "array<atomic<u32>>";
    case "f16":
      return "array<f16>";
    case "f16x4":
      return "array<vec4<f16>>";
    case "u32x4":
      return "array<vec4<u32>>";
    case "f16x8":
      return "array<mat2x4<f16>>";
  }
}

/**
 * Build the WGSL module for `kernel` given `identity[i]`, a key saying which GPU buffer the i-th
 * declared buffer is bound to (equal keys are merged into one binding). Throws if two merged
 * buffers disagree on their WGSL type, or on too many params.
 */
export function assembleWgsl(kernel: Kernel, identity: readonly number[]): AssembledKernel {
  if (identity.length !== kernel.buffers.length) throw new Error(`kernel ${kernel.label}: ${kernel.buffers.length} buffers declared, ${identity.length} bound`);
  if (kernel.params.length > MAX_PARAMS) throw new Error(`kernel ${kernel.label}: ${kernel.params.length} params exceed ${MAX_PARAMS}`);
  const slots: { write: boolean; name: string; type: BindType }[] = [];
  const slotOf: number[] = [];
  const firstSlotOfId = new Map<number, number>();
  let code = kernel.code;
  kernel.buffers.forEach((b, i) => {
    if (!b.name.startsWith("b_")) throw new Error(`kernel ${kernel.label}: buffer name "${b.name}" must start with b_`);
    const id = identity[i]!;
    const s = firstSlotOfId.get(id);
    if (s === undefined) {
      firstSlotOfId.set(id, slots.length);
      slotOf.push(slots.length);
      slots.push({ write: b.write, name: b.name, type: b.type });
    } else {
      const slot = slots[s]!;
      if (slot.type !== b.type) throw new Error(`kernel ${kernel.label}: buffers ${slot.name} (${slot.type}) and ${b.name} (${b.type}) are the same GPU buffer but declared with different types`);
      slot.write = slot.write || b.write;
      slotOf.push(s);
      code = code.replace(new RegExp(`\\b${b.name}\\b`, "g"), slot.name);
    }
  });
  const fields = kernel.params.length > 0 ? kernel.params.map((p) => `  ${p.name}: ${p.type},`).join("\n") : "  _unused: u32,";
  const decls = slots
    .map((s, i) => {
      const access = s.write || s.type === "atomic" ? "read_write" : "read";
      return `@group(0) @binding(${i + 1}) var<storage, ${access}> ${s.name}: ${wgslArrayType(s.type)};`;
    })
    .join("\n");
  // WGSL requires `enable` directives before any declaration: hoist the kernel's above the prelude.
  const enables = code.match(/^enable [a-z0-9_, ]+;[ \t]*$/gm) ?? [];
  if (enables.length > 0) code = code.replace(/^enable [a-z0-9_, ]+;[ \t]*$/gm, "");
  const source = `${enables.map((e) => `${e.trim()}\n`).join("")}${PRELUDE}\nstruct Params {\n${fields}\n};\n@group(0) @binding(0) var<uniform> P: Params;\n${decls}\n${code}`;
  return { source, slots: slots.map((s) => ({ write: s.write || s.type === "atomic" })), slotOf };
}

/** One planned dispatch: a kernel, the buffers bound to its declared buffers (in declaration
 * order), its parameter values (in declaration order) and its workgroup count — a number is split
 * into a 2-D grid by the backend (`grid2d` in grid.ts), a triple is used as is. */
export interface Launch {
  kernel: Kernel;
  bufs: readonly Buf[];
  params: readonly number[];
  workgroups: number | readonly [number, number, number];
}
