/**
 * Distributed sampler over training windows: every epoch is a seeded permutation of the windows;
 * consecutive runs of G = micro × accum × dp windows form global batches (a last partial one is
 * dropped). Global batch b is cut into accum × dp micro-batch slots of `micro` windows; rank r of a
 * dp world of n takes slots r, r + n, r + 2n, … — one per accumulation step — so ranks see
 * disjoint windows and together cover the global batch (DeepSpeed/PyTorch DistributedSampler
 * semantics at micro-batch granularity). The position (epoch, index = global batch within the
 * epoch, micro = next accumulation step) is checkpointable; it does not depend on the rank.
 */
import { mixSeed, permutation, Rng } from "./prng.ts";

/** Checkpointable position of the training stream. */
export interface SamplerState {
  epoch: number;
  /** Global batch within the epoch. */
  index: number;
  /** Next accumulation step within that batch (0 ≤ micro < accum). */
  micro: number;
}

/** Shape of the sampling. */
export interface SamplerOptions {
  numWindows: number;
  micro: number;
  accum: number;
  worldSize: number;
  rank: number;
  seed: number;
  /** Shuffle each epoch (default true); false keeps window order (for tests/eval). */
  shuffle?: boolean;
}

/** See the module comment. */
export class DistributedSampler {
  /** Windows per global batch (micro × accum × dp). */
  readonly globalBatch: number;
  /** Whole global batches per epoch. */
  readonly batchesPerEpoch: number;
  private pos: SamplerState = { epoch: 0, index: 0, micro: 0 };
  private permEpoch = -1;
  private perm: Int32Array = new Int32Array(0);

  /** @throws RangeError when the options are not positive integers, rank ∉ [0, worldSize), or
   * there are fewer windows than one global batch (the message names both counts). */
  constructor(private readonly o: SamplerOptions) {
    for (const k of ["numWindows", "micro", "accum", "worldSize", "seed"] as const) {
      if (!Number.isInteger(o[k]) || o[k] < (k === "seed" || k === "numWindows" ? 0 : 1)) throw new RangeError(`DistributedSampler: ${k} must be a positive integer, got ${o[k]}`);
    }
    if (!Number.isInteger(o.rank) || o.rank < 0 || o.rank >= o.worldSize) throw new RangeError(`DistributedSampler: rank must be in [0, ${o.worldSize}), got ${o.rank}`);
    this.globalBatch = o.micro * o.accum * o.worldSize;
    this.batchesPerEpoch = Math.floor(o.numWindows / this.globalBatch);
    if (this.batchesPerEpoch < 1) {
      throw new RangeError(`DistributedSampler: ${o.numWindows} windows are fewer than one global batch of ${this.globalBatch} (micro ${o.micro} × accum ${o.accum} × dp ${o.worldSize})`);
    }
  }

  /** The window order of `epoch` (cached for the current epoch). */
  epochOrder(epoch: number): Int32Array {
    if (epoch !== this.permEpoch) {
      if (this.o.shuffle === false) {
        this.perm = Int32Array.from({ length: this.o.numWindows }, (_, i) => i);
      } else {
        this.perm = permutation(this.o.numWindows, new Rng(mixSeed(this.o.seed, epoch)));
      }
      this.permEpoch = epoch;
    }
    return this.perm;
  }

  /** Window ids of `rank`'s micro-batch for accumulation step `micro` of global batch `index` of `epoch`. */
  windowsAt(epoch: number, index: number, micro: number, rank = this.o.rank): Int32Array {
    const order = this.epochOrder(epoch);
    const slot = micro * this.o.worldSize + rank;
    const start = index * this.globalBatch + slot * this.o.micro;
    return order.slice(start, start + this.o.micro);
  }

  /** Window ids of this rank's next micro-batch, and the position it came from; advances. */
  next(): { windows: Int32Array; position: SamplerState } {
    const position = { ...this.pos };
    const windows = this.windowsAt(position.epoch, position.index, position.micro);
    let { epoch, index, micro } = position;
    if (++micro === this.o.accum) {
      micro = 0;
      if (++index === this.batchesPerEpoch) {
        index = 0;
        epoch++;
      }
    }
    this.pos = { epoch, index, micro };
    return { windows, position };
  }

  /** Current position (copy). */
  state(): SamplerState {
    return { ...this.pos };
  }

  /** Restore a position from {@link state}; throws if it is outside this sampler's epoch. */
  loadState(s: SamplerState): void {
    const ok = s && Number.isInteger(s.epoch) && s.epoch >= 0 && Number.isInteger(s.index) && s.index >= 0 && s.index < this.batchesPerEpoch && Number.isInteger(s.micro) && s.micro >= 0 && s.micro < this.o.accum;
    if (!ok) throw new RangeError(`DistributedSampler.loadState: expected {epoch >= 0, index in [0, ${this.batchesPerEpoch}), micro in [0, ${this.o.accum})}, got ${JSON.stringify(s)}`);
    this.pos = { epoch: s.epoch, index: s.index, micro: s.micro };
  }
}
