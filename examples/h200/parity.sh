#!/usr/bin/env bash
# One H200 call (carry .device and .whl): each real-shape job of this folder trained by ZeroMoE
# (ZeRO-0, bf16, tensor cores on) with --dump-batches/--save-init, then Transformers bf16 autocast
# (eager) and DeepSpeed ZeRO-3 (world size 1) trained from the same weights on the same batches by
# core/bench/hf_reference.py, each step's relative loss difference and routing difference printed
# (docs/summary.md "Batch dumps and step-0 weights"). Logs and summaries land in $OUT.
#   JOBS="llama3 mixtral qwen3"  STEPS=6  ENGINES="eager deepspeed"
set -u
source .device/enter.sh >/dev/null
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
export WGPU_NATIVE_LIB=$ZEROMOE_COOP_LIB ZEROMOE_WGPU=coop ZEROMOE_TENSOR_CORES=on
OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"
for j in ${JOBS:-llama3 mixtral qwen3}; do
  b=/tmp/parity-$j; rm -rf "$b"; mkdir -p "$b"
  echo "=== zeromoe $j $(date +%T)"
  timeout ${T_TRAIN:-150} bun run train --config examples/h200/$j-bytes.json --steps ${STEPS:-6} --dump-batches "$b/batches" --save-init "$b/init" --summary "$OUT/$j-zeromoe.json" > "$OUT/$j-zeromoe.log" 2>&1
  echo "rc $?"; grep -E "^(step|done|error)" "$OUT/$j-zeromoe.log" | cut -c1-120
  for e in ${ENGINES:-eager deepspeed}; do
    echo "=== $e $j $(date +%T)"
    timeout ${T_REF:-200} python3 core/bench/hf_reference.py --batches "$b/batches" --weights "$b/init" --engine $e --stage 3 --warmup 2 --compare "$OUT/$j-zeromoe.json" --out "$OUT/$j-$e.json" --log "$OUT/$j-$e.steps.jsonl" > "$OUT/$j-$e.log" 2>&1
    echo "rc $?"; tail -${REF_TAIL:-14} "$OUT/$j-$e.log" | cut -c1-240
  done
  rm -rf "$b"
done
