/**
 * DeepSpeed's batch-size rule (deepspeed.ai config-json, "Batch Size Related Parameters";
 * DeepSpeed `runtime/config.py` `_set_batch_related_parameters`):
 *
 *   train_batch_size = train_micro_batch_size_per_gpu × gradient_accumulation_steps × dp_world_size
 *
 * Two of the three determine the third. Only `train_batch_size` → accumulation 1; only the
 * micro-batch → accumulation 1; only the accumulation steps → error, as in DeepSpeed.
 */
import { addIssue, type CheckContext } from "./schema.ts";

/** The three batch keys as given (undefined = absent). */
export interface BatchInput {
  train_batch_size?: number;
  train_micro_batch_size_per_gpu?: number;
  gradient_accumulation_steps?: number;
}

/** The three batch keys, all resolved. */
export interface BatchSizes {
  train_batch_size: number;
  train_micro_batch_size_per_gpu: number;
  gradient_accumulation_steps: number;
}

/**
 * Resolves the batch triple for `dpWorldSize` ranks. Records an issue (path
 * `train_batch_size`, naming every given value and the dp world size, and saying when that came
 * from `--world-size` on the command line) and returns null when the values are inconsistent or
 * under-determined.
 */
export function resolveBatchSizes(b: BatchInput, dpWorldSize: number, ctx: CheckContext): BatchSizes | null {
  const tbs = b.train_batch_size;
  const mbs = b.train_micro_batch_size_per_gpu;
  const gas = b.gradient_accumulation_steps;
  const dp = dpWorldSize;
  // a world size given on the command line is named as such: the job file may look consistent
  const dpFrom = ctx.sourceOf?.("world_size") === "<command line>" ? " from --world-size on the command line" : "";
  const given = `train_batch_size=${tbs ?? "unset"}, train_micro_batch_size_per_gpu=${mbs ?? "unset"}, gradient_accumulation_steps=${gas ?? "unset"}, dp world size=${dp}${dpFrom}`;
  const fail = (why: string): null => {
    addIssue(ctx, "train_batch_size", `${why} (${given})`);
    return null;
  };
  if (tbs !== undefined && mbs !== undefined && gas !== undefined) {
    if (tbs !== mbs * gas * dp) {
      return fail(`inconsistent batch sizes: train_batch_size must equal train_micro_batch_size_per_gpu × gradient_accumulation_steps × dp world size = ${mbs} × ${gas} × ${dp} = ${mbs * gas * dp}`);
    }
    return { train_batch_size: tbs, train_micro_batch_size_per_gpu: mbs, gradient_accumulation_steps: gas };
  }
  if (tbs !== undefined && mbs !== undefined) {
    const denom = mbs * dp;
    if (tbs % denom !== 0) return fail(`train_batch_size must be a multiple of train_micro_batch_size_per_gpu × dp world size = ${denom}`);
    return { train_batch_size: tbs, train_micro_batch_size_per_gpu: mbs, gradient_accumulation_steps: tbs / denom };
  }
  if (tbs !== undefined && gas !== undefined) {
    const denom = gas * dp;
    if (tbs % denom !== 0) return fail(`train_batch_size must be a multiple of gradient_accumulation_steps × dp world size = ${denom}`);
    return { train_batch_size: tbs, train_micro_batch_size_per_gpu: tbs / denom, gradient_accumulation_steps: gas };
  }
  if (mbs !== undefined && gas !== undefined) {
    return { train_batch_size: mbs * gas * dp, train_micro_batch_size_per_gpu: mbs, gradient_accumulation_steps: gas };
  }
  if (tbs !== undefined) {
    if (tbs % dp !== 0) return fail(`train_batch_size must be a multiple of the dp world size ${dp}`);
    return { train_batch_size: tbs, train_micro_batch_size_per_gpu: tbs / dp, gradient_accumulation_steps: 1 };
  }
  if (mbs !== undefined) {
    return { train_batch_size: mbs * dp, train_micro_batch_size_per_gpu: mbs, gradient_accumulation_steps: 1 };
  }
  return fail("give train_batch_size or train_micro_batch_size_per_gpu (two of the three batch keys determine the third)");
}
