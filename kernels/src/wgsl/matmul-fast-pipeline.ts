/**
 * Pipeline cache and dispatch recording for the fast matmul over a plain WebGPU `GPUDevice`
 * (works on wgpu-native through our FFI layer and on Deno's built-in `navigator.gpu`).
 */
import { type MatmulFastPlan, planWGSL } from "./matmul-fast.ts";
import { MATMUL_PARAM_WORDS } from "./matmul-fast-wgsl.ts";

/** Compiles fast-matmul pipelines on first use (one per variant key) and records dispatches. */
export class MatmulFastPipelines {
  private readonly cache = new Map<string, GPUComputePipeline>();

  /** @param device the device every pipeline and buffer belongs to. */
  constructor(readonly device: GPUDevice) {}

  /** The compute pipeline of a plan's variant, compiled on first request. */
  pipeline(plan: MatmulFastPlan): GPUComputePipeline {
    let p = this.cache.get(plan.key);
    if (!p) {
      const module = this.device.createShaderModule({ label: plan.key, code: planWGSL(plan) });
      p = this.device.createComputePipeline({ label: plan.key, layout: "auto", compute: { module, entryPoint: "main" } });
      this.cache.set(plan.key, p);
    }
    return p;
  }

  /** A uniform buffer holding the plan's params (16 u32 words), written through the queue. */
  paramsBuffer(plan: MatmulFastPlan): GPUBuffer {
    const buf = this.device.createBuffer({ label: "matmul params", size: MATMUL_PARAM_WORDS * 4, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    this.device.queue.writeBuffer(buf, 0, plan.params);
    return buf;
  }

  /** A bind group for the plan over whole buffers a, b, out (storage) and params (uniform). */
  bindGroup(plan: MatmulFastPlan, a: GPUBuffer, b: GPUBuffer, out: GPUBuffer, params: GPUBuffer): GPUBindGroup {
    return this.device.createBindGroup({
      layout: this.pipeline(plan).getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: a } },
        { binding: 1, resource: { buffer: b } },
        { binding: 2, resource: { buffer: out } },
        { binding: 3, resource: { buffer: params } },
      ],
    });
  }

  /** Records the dispatch into an open compute pass; nothing is recorded when the plan is empty. */
  dispatch(pass: GPUComputePassEncoder, plan: MatmulFastPlan, bindGroup: GPUBindGroup): void {
    const [x, y, z] = plan.workgroups;
    if (x === 0) return;
    pass.setPipeline(this.pipeline(plan));
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(x, y, z);
  }
}
