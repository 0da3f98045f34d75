/**
 * Bytes the offload plugin holds off the device on this rank, per tag (the backend's tags: `optim`
 * for master/m/v, `param` for offloaded parameters, `grad` for the host copies of the owned gradient
 * shards, `comm` for staging buffers), in host memory and
 * in NVMe files, and bytes moved between device, host and NVMe. Reported in the run summary
 * (`offload` section) and the per-step line.
 */

/** Tags of host-side buffers. */
export type HostTag = "optim" | "param" | "grad" | "comm";

/** Byte counters (see the module comment). */
export class HostLedger {
  readonly host: Record<HostTag, number> = { optim: 0, param: 0, grad: 0, comm: 0 };
  readonly nvme: Record<HostTag, number> = { optim: 0, param: 0, grad: 0, comm: 0 };
  peakHost = 0;
  /** Steps (gather-window `endStep`s) over which `moved.param_h2d*` were counted. */
  paramSteps = 0;
  /** Bytes moved so far: gradients device→host, parameters host→device, NVMe reads and writes;
   * `param_h2d_skipped`: parameter bytes of expert fetches skipped because no rank routed tokens to
   * the expert (gather-window.ts) — `param_h2d + param_h2d_skipped` is what fetching every expert moves. */
  readonly moved = { grad_d2h: 0, param_h2d: 0, param_h2d_skipped: 0, nvme_read: 0, nvme_write: 0 };

  /** Record `bytes` more (negative: fewer) of `tag` in host memory. */
  addHost(tag: HostTag, bytes: number): void {
    this.host[tag] += bytes;
    const tot = this.host.optim + this.host.param + this.host.grad + this.host.comm;
    if (tot > this.peakHost) this.peakHost = tot;
  }

  /** Record `bytes` more (negative: fewer) of `tag` in NVMe files. */
  addNvme(tag: HostTag, bytes: number): void {
    this.nvme[tag] += bytes;
  }

  /** A JSON snapshot. */
  snapshot(): { host_bytes: Record<HostTag, number>; host_peak_bytes: number; nvme_bytes: Record<HostTag, number>; moved_bytes: HostLedger["moved"] } {
    return { host_bytes: { ...this.host }, host_peak_bytes: this.peakHost, nvme_bytes: { ...this.nvme }, moved_bytes: { ...this.moved } };
  }
}
