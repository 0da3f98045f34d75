/**
 * The trainer's log lines (printed by rank 0): one per `steps_per_print` steps, one per
 * evaluation. Pure formatting; figures arrive in SI units (bytes, seconds).
 */
import { MEM_TAGS, type MemTag } from "@zeromoe/kernels";

/** Bytes → MiB with 2 decimals ("0.25"). */
export function mib(bytes: number): string {
  return (bytes / 1048576).toFixed(2);
}

/** "param 1.00 grad 1.00 optim 2.01 …" (MiB) for every tag with a non-zero current value, plus
 * padding when non-zero; "0" when nothing is allocated. */
export function formatMemory(current: Readonly<Record<MemTag, number>>, paddingBytes = 0): string {
  const parts: string[] = [];
  for (const t of MEM_TAGS) if (current[t] > 0) parts.push(`${t} ${mib(current[t])}`);
  if (paddingBytes > 0) parts.push(`padding ${mib(paddingBytes)}`);
  return parts.length ? parts.join(" ") : "0";
}

/** What one step line shows. */
export interface StepLineFields {
  step: number;
  totalSteps: number;
  /** Mean training loss of the step over all ranks. */
  loss: number;
  lr: number;
  /** Global tokens per second over the steps since the previous line. */
  tokensPerSecond: number;
  lossScale: number;
  gradNorm: number;
  skipped: boolean;
  /** Rank 0's current bytes per tag. */
  memory: Readonly<Record<MemTag, number>>;
  paddingBytes: number;
  /** Rank 0's peak of the sum over all tags since the start, bytes. */
  peakTotal: number;
}

/** `step 10/300 | loss 4.1234 | lr 1.00e-3 | 2950 tok/s | scale 1 | grad_norm 0.953 | mem MiB param 1.00 … | peak MiB 14.37`. */
export function formatStepLine(f: StepLineFields): string {
  const w = String(f.totalSteps).length;
  const parts = [
    `step ${String(f.step).padStart(w)}/${f.totalSteps}`,
    `loss ${f.loss.toFixed(4)}`,
    `lr ${f.lr.toExponential(2)}`,
    `${Math.round(f.tokensPerSecond)} tok/s`,
    `scale ${f.lossScale}`,
    `grad_norm ${Number.isFinite(f.gradNorm) ? f.gradNorm.toPrecision(3) : String(f.gradNorm)}`,
    `mem MiB ${formatMemory(f.memory, f.paddingBytes)}`,
    `peak MiB ${mib(f.peakTotal)}`,
  ];
  if (f.skipped) parts.push("SKIPPED (inf/NaN gradients)");
  return parts.join(" | ");
}

/** `eval step 50 | val_loss 3.2101 | 8 sequences | 1.2 s`. */
export function formatEvalLine(step: number, valLoss: number, sequences: number, seconds: number): string {
  return `eval step ${step} | val_loss ${valLoss.toFixed(4)} | ${sequences} sequences | ${seconds.toFixed(1)} s`;
}
