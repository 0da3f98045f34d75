#!/usr/bin/env bash
# One H200 call (run from the repository root with .device/ carried: the packed run-time with bun,
# the wgpu libraries and node_modules, staged by stage-node-modules.py): the real-shape jobs of this folder (byte tokens on moby-dick, vocabularies
# and layers of Llama-3-8B, Qwen3-30B-A3B, Mixtral-8x7B), bf16 on tensor cores, ZeRO-0.
#   PARTS="tests gemm profile train"  which parts run (default: all four)
#   JOBS="llama3 qwen3 mixtral"        which jobs
#   STEPS=6                            steps of the timed runs
# tests: the packed tensor-core kernels on real tensor cores; gemm: kernels/bench/gemm-real-shapes.ts
# beside cuBLAS; profile: ZEROMOE_PROFILE_KERNELS per job (3 steps); train: timed runs, summaries in $OUT.
set -u
source .device/enter.sh >/dev/null
export WGPU_NATIVE_LIB=$ZEROMOE_COOP_LIB ZEROMOE_WGPU=coop ZEROMOE_TENSOR_CORES=on
OUT=${OUT:-/tmp/h200-out}; mkdir -p "$OUT"
parts=" ${PARTS:-tests gemm profile train} "
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [[ $parts == *" tests "* ]]; then
  echo "=== tests $(date +%T)"
  timeout ${T_TESTS:-200} bun test --timeout 120000 kernels/test/webgpu/matmul-coop-packed.test.ts kernels/test/webgpu/grouped-matmul-coop.test.ts 2>&1 | grep -E "^\(fail\)|^ *[0-9]+ (pass|fail|skip)|error" | head -30
fi
if [[ $parts == *" gemm "* ]]; then
  echo "=== gemm $(date +%T)"
  timeout ${T_GEMM:-200} bun kernels/bench/gemm-real-shapes.ts --variants ${VARIANTS:-regs8,coop,none} --torch --json "$OUT/gemm.json" 2>&1 | tail -${GEMM_TAIL:-45}
fi
for j in ${JOBS:-llama3 qwen3 mixtral}; do
  cfg=examples/h200/$j-bytes.json
  if [[ $parts == *" profile "* ]]; then
    echo "=== profile $j $(date +%T)"
    ZEROMOE_PROFILE_KERNELS=$OUT/profile-$j.json timeout ${T_PROFILE:-120} bun run train --config "$cfg" --steps 3 2>&1 | grep -E "^(profile|startup|done|error)" 
    bun -e "const p=JSON.parse(require('fs').readFileSync('$OUT/profile-$j.json','utf8'));console.log('gpu ms/step',p.gpu_ms_per_step.toFixed(1),'dispatches',p.dispatches_per_step);for(const k of p.kernels.slice(0,${TOP:-22}))console.log(k.ms_per_step.toFixed(2).padStart(9),(100*k.share).toFixed(1).padStart(5)+'%',String(k.dispatches_per_step).padStart(5),k.label)" 2>&1
  fi
  if [[ $parts == *" train "* ]]; then
    echo "=== train $j $(date +%T)"
    s=$(date +%s)
    timeout ${T_TRAIN:-150} bun run train --config "$cfg" --steps ${STEPS:-6} --summary "$OUT/$j.json" 2>&1 | grep -E "^(step|startup|done|error|memory)"
    echo "rc ${PIPESTATUS[0]} wall $(( $(date +%s) - s )) s"
    bun -e "const s=JSON.parse(require('fs').readFileSync('$OUT/$j.json','utf8'));const t=s.history??null;console.log('losses',s.losses.map(x=>x.toFixed(3)).join(' '));console.log('peak_total',s.memory?.per_rank?.[0]?.peak_total,'by tag',JSON.stringify(s.memory?.per_rank?.[0]?.peak_by_tag))" 2>&1 | head -5
  fi
done
