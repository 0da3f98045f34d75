/**
 * Environment report for `bun run report` (like DeepSpeed's `ds_report`): Bun, wgpu-native, every
 * adapter wgpu-native finds (name, backend, type, features, key limits, and whether a device runs
 * a small compute check), and which backend `backend: auto` would pick and why.
 *
 * The "auto" line comes from kernels/src/select.ts (the WebGPU backend owns the choice): its
 * `describeAutoChoice(): Promise<AutoChoice>` when exported, else it runs `createBackend("auto")`
 * (with its verification computation) and reports the chosen backend and reason. Another provider
 * can be installed with {@link setAutoChoiceProvider}. Without any, the report says so.
 */
import { arch, cpus, platform, release, totalmem } from "node:os";
import { createGPU, libraryVersion, type AdapterInfoEx } from "./ffi/index.ts";
import { resolveLibrary } from "./ffi/library.ts";
import { libraryKind, loadNative } from "./ffi/native.ts";
import { cooperativeMatrixProperties, formatCoopConfig } from "./ffi/cooperative-matrix.ts";
import { runtimeLabel } from "./runtime/detect.ts";

/** The limits the report shows (WebGPU names). */
export const REPORT_LIMITS = [
  "maxStorageBufferBindingSize",
  "maxBufferSize",
  "maxComputeWorkgroupSizeX",
  "maxComputeInvocationsPerWorkgroup",
  "maxComputeWorkgroupStorageSize",
  "maxComputeWorkgroupsPerDimension",
] as const;

/** Which backend `backend: auto` picks, and the reason in one line. */
export interface AutoChoice {
  backend: "webgpu" | "cpu";
  reason: string;
}

/** One adapter as reported. Sizes in bytes. */
export interface AdapterReport {
  index: number;
  name: string;
  vendor: string;
  architecture: string;
  driver: string;
  backend: string;
  type: string;
  features: string[];
  limits: Record<(typeof REPORT_LIMITS)[number], number>;
  /** Result of the compute check (a 1-workgroup WGSL dispatch read back); null when not probed. */
  check: { ok: boolean; ms: number; error?: string } | null;
  /** The driver's cooperative-matrix configurations ("16x16x16 f16→f32", …); null when the
   * loaded library cannot list them (the prebuilt wgpu-native). */
  cooperativeMatrix: string[] | null;
  /** Subgroup sizes the adapter reports, or null when it offers no subgroup feature (neither the
   * standard "subgroups" nor wgpu-native's native "wgpu-subgroup", which is what wgpu-native 29
   * lists on Vulkan) or reports no sizes (0). */
  subgroupSizes: { min: number; max: number } | null;
}

/** The subgroup feature an adapter offers under either name ("subgroups" standard first), or null. */
export function subgroupFeature(features: readonly string[]): string | null {
  return ["subgroups", "wgpu-subgroup"].find((f) => features.includes(f)) ?? null;
}

/** Everything {@link formatReport} prints. */
export interface Report {
  bunVersion: string;
  platform: string;
  cpu: string;
  cpuCount: number;
  memoryBytes: number;
  wgpuNativeVersion: string | null;
  wgpuNativeLibrary: string | null;
  /** Which library is loaded ("wgpu-native" prebuilt, or "zm-wgpu": native/wgpu-coop) and what
   * selected it (option, WGPU_NATIVE_LIB, ZEROMOE_WGPU=coop, default); null when none loaded. */
  wgpuLibraryKind: string | null;
  wgpuLibrarySelectedBy: string | null;
  /** Why wgpu-native could not be loaded or queried (null when it could). */
  wgpuError: string | null;
  adapters: AdapterReport[];
  auto: AutoChoice | null;
  /** Why `auto` is null. */
  autoNote: string | null;
}

type AutoChoiceProvider = () => Promise<AutoChoice>;
let provider: AutoChoiceProvider | null = null;

/** Install the function that explains `backend: auto` (overrides kernels/src/select.ts). */
export function setAutoChoiceProvider(fn: AutoChoiceProvider | null): void {
  provider = fn;
}

/** The shape of kernels/src/select.ts used here (imported at run time, so the report still runs
 * when that module is absent or broken). */
interface SelectModule {
  describeAutoChoice?: AutoChoiceProvider;
  createBackend?: (kind: "auto") => Promise<{ backend: { info: { name: string }; destroy?: () => void }; reason: string }>;
}

async function autoChoice(): Promise<{ auto: AutoChoice | null; note: string | null }> {
  try {
    if (provider) return { auto: await provider(), note: null };
    const spec = new URL("./select.ts", import.meta.url).href;
    const mod = (await import(spec).catch(() => null)) as SelectModule | null;
    if (!mod) return { auto: null, note: "kernels/src/select.ts not present (extension point: createBackend or describeAutoChoice)" };
    if (typeof mod.describeAutoChoice === "function") return { auto: await mod.describeAutoChoice(), note: null };
    if (typeof mod.createBackend === "function") {
      // Do what `backend: auto` does (including its verification computation) and report it.
      const r = await mod.createBackend("auto");
      r.backend.destroy?.();
      const backend = r.backend.info.name === "webgpu" ? "webgpu" : "cpu";
      return { auto: { backend, reason: r.reason.replace(/^auto → /, "") }, note: null };
    }
    return { auto: null, note: "kernels/src/select.ts exports neither createBackend nor describeAutoChoice" };
  } catch (e) {
    return { auto: null, note: `backend selection failed: ${(e as Error).message}` };
  }
}

const CHECK_WGSL = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> v: array<u32>;
@compute @workgroup_size(7) fn main(@builtin(local_invocation_index) i: u32) { v[i] = v[i] * 3u + i; }`;

/** Run a 7-element WGSL dispatch on `adapter` and compare with the expected values. */
async function checkAdapter(adapter: GPUAdapter): Promise<{ ok: boolean; ms: number; error?: string }> {
  const t0 = performance.now();
  let device: GPUDevice | null = null;
  try {
    device = await adapter.requestDevice();
    const input = Uint32Array.from([5, 11, 2, 97, 0, 41, 13]);
    const buf = device.createBuffer({ size: 28, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(buf, 0, input);
    const read = device.createBuffer({ size: 28, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const pipeline = device.createComputePipeline({ layout: "auto", compute: { module: device.createShaderModule({ code: CHECK_WGSL }) } });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] }));
    pass.dispatchWorkgroups(1);
    pass.end();
    enc.copyBufferToBuffer(buf, 0, read, 0, 28);
    device.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    const got = new Uint32Array(read.getMappedRange().slice(0));
    read.unmap();
    const ok = got.every((v, i) => v === input[i] * 3 + i);
    return ok ? { ok, ms: performance.now() - t0 } : { ok, ms: performance.now() - t0, error: `wrong result ${Array.from(got)}` };
  } catch (e) {
    const msg = (e as Error).message.replace(/\s+/g, " ").trim();
    return { ok: false, ms: performance.now() - t0, error: msg.length > 400 ? `${msg.slice(0, 400)}…` : msg };
  } finally {
    device?.destroy();
  }
}

/**
 * Gather the report. `probe` (default true) runs the compute check on every adapter (a few ms
 * each; on CPU drivers up to ~100 ms). Never throws: a missing wgpu-native becomes `wgpuError`.
 */
export async function collectReport(options: { probe?: boolean; libraryPath?: string } = {}): Promise<Report> {
  const c = cpus();
  const report: Report = {
    bunVersion: process.versions.bun ?? `(not Bun: ${runtimeLabel()})`,
    platform: `${platform()} ${release()} ${arch()}`,
    cpu: c[0]?.model ?? "unknown",
    cpuCount: c.length,
    memoryBytes: totalmem(),
    wgpuNativeVersion: null,
    wgpuNativeLibrary: null,
    wgpuLibraryKind: null,
    wgpuLibrarySelectedBy: null,
    wgpuError: null,
    adapters: [],
    auto: null,
    autoNote: null,
  };
  try {
    const location = resolveLibrary(options.libraryPath);
    report.wgpuNativeLibrary = location.libraryPath;
    report.wgpuLibrarySelectedBy = location.selectedBy;
    report.wgpuLibraryKind = libraryKind(loadNative(options.libraryPath));
    report.wgpuNativeVersion = libraryVersion({ libraryPath: options.libraryPath });
    const gpu = createGPU({ libraryPath: options.libraryPath }) as unknown as { enumerateAdapters(): Promise<GPUAdapter[]> };
    const adapters = await gpu.enumerateAdapters();
    for (const [index, a] of adapters.entries()) {
      const info = a.info as AdapterInfoEx;
      const lim = a.limits as unknown as Record<string, number>;
      report.adapters.push({
        index,
        name: info.device || info.description || info.vendor,
        vendor: info.vendor,
        architecture: info.architecture,
        driver: info.description,
        backend: info.backendType,
        type: info.adapterType,
        features: [...a.features].sort(),
        limits: Object.fromEntries(REPORT_LIMITS.map((k) => [k, lim[k]])) as AdapterReport["limits"],
        check: options.probe === false ? null : await checkAdapter(a),
        cooperativeMatrix: cooperativeMatrixProperties(a)?.map(formatCoopConfig) ?? null,
        subgroupSizes: subgroupFeature([...a.features]) && (info.subgroupMinSize ?? 0) > 0 && (info.subgroupMaxSize ?? 0) > 0 ? { min: info.subgroupMinSize!, max: info.subgroupMaxSize! } : null,
      });
    }
  } catch (e) {
    report.wgpuError = (e as Error).message;
  }
  const { auto, note } = await autoChoice();
  report.auto = auto;
  report.autoNote = note;
  return report;
}

function bytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(n % 2 ** 30 === 0 ? 0 : 2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(n % 2 ** 20 === 0 ? 0 : 2)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(n % 2 ** 10 === 0 ? 0 : 2)} KiB`;
  return `${n} B`;
}

/** Render a {@link Report} as aligned text, one section per topic. */
export function formatReport(r: Report): string {
  const line = "-".repeat(78);
  const row = (k: string, v: string) => `${k.padEnd(36, ".")} ${v}`;
  const out: string[] = [line, "ZeroMoE environment report", line];
  out.push(row("bun", r.bunVersion));
  out.push(row("platform", r.platform));
  out.push(row("cpu", `${r.cpu} (${r.cpuCount} cores)`));
  out.push(row("memory", bytes(r.memoryBytes)));
  out.push(row("wgpu-native", r.wgpuNativeVersion ?? "not available"));
  if (r.wgpuNativeLibrary) out.push(row("wgpu-native library", r.wgpuNativeLibrary));
  if (r.wgpuLibraryKind) out.push(row("wgpu library kind", `${r.wgpuLibraryKind} (selected by ${r.wgpuLibrarySelectedBy}; ZEROMOE_WGPU=coop picks zm-wgpu)`));
  if (r.wgpuError) out.push(`wgpu-native error: ${r.wgpuError}`);
  out.push(line, `adapters (${r.adapters.length})`, line);
  if (r.adapters.length === 0) out.push(r.wgpuError ? "none (wgpu-native unavailable)" : "none found (no Vulkan/Metal/DX12/GL driver?)");
  for (const a of r.adapters) {
    out.push(`[${a.index}] ${a.name}`);
    out.push(row("  backend / type", `${a.backend} / ${a.type}`));
    out.push(row("  vendor / architecture", `${a.vendor || "-"} / ${a.architecture || "-"}`));
    out.push(row("  driver", a.driver || "-"));
    for (const k of REPORT_LIMITS) {
      const v = a.limits[k];
      out.push(row(`  ${k}`, k.endsWith("Size") && !k.includes("Workgroup") ? `${v} (${bytes(v)})` : k === "maxComputeWorkgroupStorageSize" ? `${v} (${bytes(v)})` : String(v)));
    }
    const sg = subgroupFeature(a.features);
    const sgText = sg ? `yes (${sg}${a.subgroupSizes ? `, size ${a.subgroupSizes.min === a.subgroupSizes.max ? a.subgroupSizes.min : `${a.subgroupSizes.min}–${a.subgroupSizes.max}`}` : ""})` : "no";
    const key = [`shader-f16 ${a.features.includes("shader-f16") ? "yes" : "no"}`, `subgroups ${sgText}`, `timestamp-query ${a.features.includes("timestamp-query") ? "yes" : "no"}`].join(", ");
    out.push(row("  key features", key));
    out.push(row("  all features", a.features.join(" ")));
    out.push(row("  cooperative matrix", a.cooperativeMatrix === null ? "not listed (prebuilt wgpu-native; ZEROMOE_WGPU=coop lists them)" : a.cooperativeMatrix.length ? a.cooperativeMatrix.join(", ") : "none"));
    if (a.check) out.push(row("  compute check", a.check.ok ? `ok (${a.check.ms.toFixed(1)} ms)` : `FAILED: ${a.check.error}`));
  }
  out.push(line);
  out.push(row("backend auto", r.auto ? `${r.auto.backend}: ${r.auto.reason}` : `unknown (${r.autoNote})`));
  out.push(line);
  return out.join("\n");
}
