/**
 * The compute backends a job or command line may name ("auto", "webgpu", "cpu") and the
 * did-you-mean for a wrong one: a GPU-ish name ("gpu", "cuda", "vulkan", "metal", "wgpu", …) means
 * the WebGPU backend (the GPU one), where an edit-distance suggestion offered "cpu" for "gpu".
 */
import { suggest } from "./errors.ts";

/** Backend names, in the order messages list them. */
export const BACKEND_NAMES = ["auto", "webgpu", "cpu"] as const;

const GPU_WORDS = /^(gpu|cuda|nvidia|rocm|hip|vulkan|metal|wgpu|webgpu-native|dawn|dx12|d3d12|opengl|gl|accelerator|device)$/i;

/** The backend `value` most likely means, or null when nothing is close. */
export function suggestBackend(value: string): string | null {
  if (GPU_WORDS.test(value.trim())) return "webgpu";
  return suggest(value, BACKEND_NAMES);
}
