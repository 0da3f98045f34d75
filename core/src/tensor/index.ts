/** Tensors and tape-based autograd over a `Backend` (see tensor.ts and tape.ts for the design). */
export { Tensor, Variable, empty, zeros, full, fromArray, dispose, numelOf, fmtShape } from "./tensor.ts";
export type { ParamSource, TensorInit } from "./tensor.ts";
export { backward, noGrad, scope, record, recordNode, markUnit, resetTape, isGradEnabled, tapeLength, accumulateGrad, gradTarget, passGrad, takeGrad, adoptGrad, scratch, withGradMode } from "./tape.ts";
export { checkpoint } from "./checkpoint.ts";
export type { TapeUnit, OpNode, UnitMarker, GradTarget, BackwardOptions } from "./tape.ts";
export { broadcastShape } from "./broadcast.ts";
export { add, sub, mul, div, unary, silu, gelu, geluErf, exp, log, neg, sqrt, rsqrt, relu, sigmoid, square, affine, scale } from "./ops/elementwise.ts";
export { matmul, linear } from "./ops/matmul.ts";
export type { MatmulOptions } from "./ops/matmul.ts";
export { sum, mean } from "./ops/reduce.ts";
export { softmax, logSoftmax } from "./ops/softmax.ts";
export { rmsnorm, layernorm } from "./ops/norm.ts";
export { embedding, checkIds } from "./ops/embedding.ts";
export { crossEntropy } from "./ops/loss.ts";
export { rope, causalAttention } from "./ops/attention.ts";
export { gatherRows, scatterAddRows, topk } from "./ops/rows.ts";
export { reshape, sliceRows, concatRows } from "./ops/shape.ts";
export { philox4x32, streamKey, normalFill, uniformFill, randint } from "./random.ts";
