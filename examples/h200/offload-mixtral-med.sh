#!/usr/bin/env bash
# What offload buys under a device memory budget (issue 13; docs/offload.md, docs/performance.md
# "Offload"): mixtral-med (core/bench/train.ts BENCH_MODELS shape: hidden 1024, intermediate 2816,
# 8 layers, 16 heads / 8 kv, 8 experts top-2, vocab 256, seq 1024) at micro-batch 1, fp32, world 1:
#   (b) --max-device-memory 4GiB without offload: must exit 2 at the memory check (before the model
#       is built), naming offload and the estimated bytes;
#   (a) the same job unbudgeted;
#   (c) the same budget with ZeRO-3 + offload_param + offload_optimizer cpu: trains.
# Micro-batch 1 with activation checkpointing, not micro 8: activations are about 139 KB per token
# per layer in fp32 (measured on the cpu backend at scaled-down shapes: linear in tokens, layers,
# hidden and intermediate), ~9 GiB at micro 8 over 8 layers. Under (c) the device keeps the fp32
# gradient shards (579M x 4 B = 2.16 GiB at world 1). The same job at 1/64 scale (hidden 128,
# intermediate 352, seq 128: parameters, activations and attention all scale by 64, only the
# vocab-256 parts by less) under a 64 MiB budget: without checkpointing it stops at 62.7 MiB in use
# (DeviceBudgetError), with it it peaks at 53.7 MiB, i.e. ~3.4 GiB at full scale (docs/offload.md).
# Each of (a) and (c) builds the model once (~170 s on the H200 host; the engine is built per
# config, so two builds); (b) stops before building; 3 steps each, the first excluded from s/step.
#
#   bash examples/h200/offload-mixtral-med.sh [out-dir]        (env: BUDGET, BACKEND, JOB, DS, STEPS)
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/offload-mixtral-med}}
JOB=${JOB:-examples/h200/mixtral-med-offload.json}
DS=${DS:-examples/h200/mixtral-med-offload-ds.json}
BUDGET=${BUDGET:-4GiB}
BACKEND=${BACKEND:-webgpu}
STEPS=${STEPS:-3}
mkdir -p "$OUT"
run() { # name, args...
  local name=$1; shift
  echo "== ($name) $*"
  bun run train --config "$JOB" --backend "$BACKEND" --steps "$STEPS" --summary "$OUT/$name.json" "$@" >"$OUT/$name.log" 2>&1
  echo $? >"$OUT/$name.rc"
  grep -E "^(step|warning|error|offload|memory|done|- max_device)" "$OUT/$name.log" | tail -n 12
  echo "   exit $(cat "$OUT/$name.rc")"
}
rm -f "$OUT"/{a,b,c}.{json,log,rc}
run b --max-device-memory "$BUDGET"
run a
run c --deepspeed "$DS" --max-device-memory "$BUDGET"
echo
bun plugins/offload/bench/budget-report.ts "$OUT"
# (b) must have exited 2 and (a), (c) 0
[ "$(cat "$OUT/b.rc")" = 2 ] && [ "$(cat "$OUT/a.rc")" = 0 ] && [ "$(cat "$OUT/c.rc")" = 0 ]
