/**
 * WebGPU error objects (WebGPU spec §22 "Errors & Debugging") and the exceptions this binding
 * throws where the spec would only report (uncaptured errors, shader compile errors, device loss).
 */

/** Base of GPUValidationError / GPUOutOfMemoryError / GPUInternalError (spec `GPUError`). */
export class GPUErrorImpl extends Error implements GPUError {
  constructor(message: string) {
    super(message);
    this.name = "GPUError";
  }
}

/** Spec `GPUValidationError`. */
export class GPUValidationErrorImpl extends GPUErrorImpl implements GPUValidationError {
  declare readonly __brand: "GPUValidationError";
  constructor(message: string) {
    super(message);
    this.name = "GPUValidationError";
  }
}

/** Spec `GPUOutOfMemoryError`. */
export class GPUOutOfMemoryErrorImpl extends GPUErrorImpl implements GPUOutOfMemoryError {
  declare readonly __brand: "GPUOutOfMemoryError";
  constructor(message: string) {
    super(message);
    this.name = "GPUOutOfMemoryError";
  }
}

/** Spec `GPUInternalError`. */
export class GPUInternalErrorImpl extends GPUErrorImpl implements GPUInternalError {
  declare readonly __brand: "GPUInternalError";
  constructor(message: string) {
    super(message);
    this.name = "GPUInternalError";
  }
}

/** Build the GPUError subclass for a WGPUErrorType (2 validation, 3 out-of-memory, else internal). */
export function makeGPUError(type: number, message: string): GPUErrorImpl {
  if (type === 2) return new GPUValidationErrorImpl(message);
  if (type === 3) return new GPUOutOfMemoryErrorImpl(message);
  return new GPUInternalErrorImpl(message);
}

/** Spec `GPUUncapturedErrorEvent`, dispatched on the device when it has listeners. */
export class GPUUncapturedErrorEventImpl extends Event {
  readonly error: GPUError;
  constructor(type: string, init: { error: GPUError }) {
    super(type);
    this.error = init.error;
  }
}

/**
 * Thrown (instead of a silent event) for an uncaptured error when the device has no
 * `uncapturederror` listener: a validation/out-of-memory/internal error outside any error scope.
 * `error` is the spec error object; `operation` names the call after which it was detected.
 */
export class GPUUncapturedError extends Error {
  readonly error: GPUError;
  readonly operation: string;
  constructor(error: GPUError, operation: string) {
    super(`WebGPU ${(error as Error).name ?? "error"} during ${operation}: ${error.message}`);
    this.name = "GPUUncapturedError";
    this.error = error;
    this.operation = operation;
  }
}

/** One WGSL diagnostic: 1-based line and column (0 when unknown), as in GPUCompilationMessage. */
export interface WGSLDiagnostic {
  message: string;
  lineNum: number;
  linePos: number;
}

/**
 * Thrown by `device.createShaderModule` when the WGSL does not compile. `message` holds the
 * compiler's text; `lineNum`/`linePos` the first error position (1-based; 0 when not given);
 * `label` the module label.
 */
export class GPUShaderCompilationError extends Error {
  readonly lineNum: number;
  readonly linePos: number;
  readonly label: string;
  readonly diagnostics: WGSLDiagnostic[];
  constructor(label: string, compilerMessage: string, diagnostics: WGSLDiagnostic[]) {
    const first = diagnostics[0];
    const where = first && first.lineNum > 0 ? ` at line ${first.lineNum}:${first.linePos}` : "";
    super(`WGSL compilation of shader module '${label}' failed${where}:\n${compilerMessage}`);
    this.name = "GPUShaderCompilationError";
    this.lineNum = first?.lineNum ?? 0;
    this.linePos = first?.linePos ?? 0;
    this.label = label;
    this.diagnostics = diagnostics;
  }
}

/**
 * Parse naga's WGSL diagnostics: it prints source locations as `┌─ wgsl:LINE:COL` (codespan style)
 * or `:LINE:COL`. Returns one entry per location found (the text is the whole message), or one
 * entry with line 0 when none is found.
 */
export function parseWGSLDiagnostics(message: string): WGSLDiagnostic[] {
  const out: WGSLDiagnostic[] = [];
  const re = /(?:┌─|-->)\s*[^\s:]*:(\d+):(\d+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(message))) out.push({ message, lineNum: Number(m[1]), linePos: Number(m[2]) });
  if (out.length === 0) {
    const m2 = /:(\d+):(\d+)/.exec(message);
    out.push({ message, lineNum: m2 ? Number(m2[1]) : 0, linePos: m2 ? Number(m2[2]) : 0 });
  }
  return out;
}

/** Spec `GPUPipelineError` (rejection of createComputePipelineAsync): a DOMException named
 * "GPUPipelineError" with a `reason` of "validation" or "internal". */
export class GPUPipelineErrorImpl extends DOMException implements GPUPipelineError {
  declare readonly __brand: "GPUPipelineError";
  readonly reason: GPUPipelineErrorReason;
  constructor(message: string, options: { reason: GPUPipelineErrorReason }) {
    super(message, "GPUPipelineError");
    this.reason = options.reason;
  }
}

/** Thrown by calls on a device that has been lost or destroyed, and used to reject its pending
 * promises. */
export class GPUDeviceLostError extends Error {
  readonly reason: GPUDeviceLostReason;
  constructor(operation: string, reason: GPUDeviceLostReason, message: string) {
    super(`${operation}: the GPU device is lost (${reason})${message ? `: ${message}` : ""}`);
    this.name = "GPUDeviceLostError";
    this.reason = reason;
  }
}

/** Thrown for parts of WebGPU outside the compute subset this binding implements. */
export function notSupported(what: string): never {
  throw new Error(`${what} is not supported: kernels/src/ffi implements the compute subset of WebGPU only`);
}

/** A DOMException-like error with a name, for spec rejections (OperationError, AbortError...). */
export function domError(name: string, message: string): Error {
  return new DOMException(message, name);
}
