#!/usr/bin/env bash
# One H200 call (carry .device and .whl): each real-shape job of this folder trained by ZeroMoE
# (ZeRO-0, bf16, tensor cores on unless told otherwise) with --dump-batches/--save-init, then
# Transformers (eager: bf16 autocast, or fp32 for an fp32 job) and DeepSpeed ZeRO-3 (world size 1)
# trained from the same weights on the same batches by core/bench/hf_reference.py; per step the
# losses of both and the relative difference (docs/summary.md "Batch dumps and step-0 weights").
# One report per job and variant: $OUT/<job><VARIANT>.txt.
#   JOBS="llama3 mixtral qwen3"  STEPS=6  ENGINES="eager deepspeed"
#   VARIANT=-fp32 DS=examples/h200/fp32.json   a DeepSpeed config merged over the job (--deepspeed)
#   TC=on|off                                   ZEROMOE_TENSOR_CORES for ZeroMoE (default on)
set -u
source .device/enter.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site
export WGPU_NATIVE_LIB=$ZEROMOE_COOP_LIB ZEROMOE_WGPU=coop ZEROMOE_TENSOR_CORES=${TC:-on}
OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"
V=${VARIANT:-}
for j in ${JOBS:-llama3 mixtral qwen3}; do
  b=/tmp/parity-$j$V; rm -rf "$b"; mkdir -p "$b"; r="$OUT/$j$V.txt"; : > "$r"
  echo "=== zeromoe $j$V (tensor cores $ZEROMOE_TENSOR_CORES${DS:+, --deepspeed $DS}) $(date +%T)" | tee -a "$r"
  timeout ${T_TRAIN:-150} bun run train --config examples/h200/$j-bytes.json ${DS:+--deepspeed $DS} --steps ${STEPS:-6} --dump-batches "$b/batches" --save-init "$b/init" --summary "$b/zeromoe.json" > "$b/zeromoe.log" 2>&1
  echo "rc $?" | tee -a "$r"; grep -E "^(backend|memory|step|done|error)" "$b/zeromoe.log" | cut -c1-160 >> "$r"
  bun -e "const s=JSON.parse(require('fs').readFileSync('$b/zeromoe.json','utf8'));const m=s.memory?.per_rank?.[0]??{};console.log('zeromoe losses',JSON.stringify(s.losses),'peak_total',m.peak_total,'peak_by_tag',JSON.stringify(m.peak_by_tag))" >> "$r" 2>&1
  for e in ${ENGINES:-eager deepspeed}; do
    echo "=== $e $j$V $(date +%T)" | tee -a "$r"
    timeout ${T_REF:-200} python3 core/bench/hf_reference.py --batches "$b/batches" --weights "$b/init" --engine $e --stage 3 --warmup 2 --compare "$b/zeromoe.json" --log "$b/$e.steps.jsonl" > "$b/$e.log" 2>&1
    echo "rc $?" | tee -a "$r"
    python3 - "$b/$e.steps.jsonl" >> "$r" 2>&1 <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    d.pop("expert_counts", None)
    print(json.dumps(d))
PY
    tail -${REF_TAIL:-6} "$b/$e.log" | cut -c1-400 >> "$r"
  done
  tail -n +1 "$r" | grep -E "^(===|rc|zeromoe losses|\{\"compare|\{\"summary)" | cut -c1-300
done
