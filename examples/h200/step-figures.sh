#!/usr/bin/env bash
# The H200 figures of docs/performance.md in one device command (issues 11, 12), each part writing
# its output under $OUT (default /tmp/step-figures) so a partial run still reports:
#   1. PyTorch eager fp32 beside ours (webgpu, fp32) for llama-small, mixtral-small, mixtral-med
#      (ours: 3 warm-up + 12 measured steps; the GPU idles at 345 MHz, so short runs catch the
#      clock ramp);
#   2. mixtral-med: the per-kernel GPU profile of one forward + backward, and the step timeline
#      (GPU busy vs idle per step, core/bench/step-gaps.ts);
#   3. the grouped expert matmuls and the flash attention beside PyTorch at the bench shapes;
#   4. tensor cores with our wgpu build (.device-coop/libzm_wgpu.so.xz): the coop matmul at 4096³ and
#      the mixtral-med step shapes beside torch (fp16, bf16, fp32), then the grouped expert products
#      on the tensor cores (the backend's path for bf16/fp16 jobs);
#   5. bf16 training on the tensor cores beside PyTorch bf16 autocast, after an fp32 run of ours so
#      the bench's second table compares the bf16 losses with the fp32 ones step by step; then
#      mixtral-med bf16 without tensor cores against fp32 the same way;
#   6. the kernel conformance suite on our wgpu build on this GPU (kernels/test/ffi, kernels/test/webgpu);
#   7. only with WITH_OFFLOAD=1: offload under a 4 GiB budget (examples/h200/offload-mixtral-med.sh).
# After packing .device/, run python3 examples/h200/stage-node-modules.py (see there why).
# Run on the device with carry [".device", ".device-coop"]:
#   source .device/enter.sh && bash examples/h200/step-figures.sh
# Parts 1–6 take more than one device call's 600 s: split them, e.g. PARTS=1,2,3 then PARTS=4,5,6
# (a comma list; default 1,2,3,4,5,6).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/step-figures}
mkdir -p "$OUT"
part() { echo; echo "=== $1"; }
want() { case ",${PARTS:-1,2,3,4,5,6}," in *",$1,"*) return 0 ;; esac; return 1; }
git log -1 --format='tree of commit %h' 2>/dev/null || true
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null || true
if want 1; then
part "1. PyTorch eager fp32"
python3 core/bench/torch_train.py --models llama-small,mixtral-small,mixtral-med --precision fp32 --steps 20 --warmup 3 2>&1 | tee "$OUT/torch-fp32.txt" | tail -5
part "1. ZeroMoE webgpu fp32"
bun run bench train --models llama-small,mixtral-small,mixtral-med --backends webgpu --steps 12 --warmup 3 2>&1 | tee "$OUT/ours-fp32.txt" | tail -6
fi
if want 2; then
part "2. mixtral-med per-kernel profile and step timeline"
bun core/bench/step-profile.ts --model mixtral-med --configs after --steps 2 --top 30 > "$OUT/prof-med.txt" 2>&1; head -12 "$OUT/prof-med.txt" | tail -9
bun core/bench/step-gaps.ts --model mixtral-med --steps 3 --warmup 2 --gaps 6 2>&1 | tee "$OUT/gaps-med.txt" | tail -14
fi
if want 3; then
part "3. grouped expert matmuls and flash attention beside PyTorch"
bun kernels/bench/grouped-matmul.ts 2>&1 | tee "$OUT/grouped.txt" | tail -16
python3 kernels/bench/torch_grouped_matmul.py 2>&1 | tee "$OUT/torch-grouped.txt" | tail -16
bun core/bench/attention-bench.ts --reps 10 2>&1 | tee "$OUT/attention.txt" | tail -8
python3 core/bench/torch_attention.py 2>&1 | tee "$OUT/torch-attention.txt" | tail -6
fi
COOP_LIB=/tmp/device-bin/libzm_wgpu.so
coop_lib() {
  [ -s "$COOP_LIB" ] && return 0
  [ -f .device-coop/libzm_wgpu.so.xz ] || { echo "no .device-coop/libzm_wgpu.so.xz in the carry: skipped"; return 1; }
  mkdir -p "$(dirname "$COOP_LIB")" && xz -dc .device-coop/libzm_wgpu.so.xz > "$COOP_LIB"
}
if want 4 && part "4. tensor cores (our wgpu build): f16 matmul beside torch" && coop_lib; then
  WGPU_NATIVE_LIB=$COOP_LIB bun kernels/bench/matmul-coop.ts --json "$OUT/coop.json" 2>&1 | tee "$OUT/coop.txt" | tail -16
  python3 kernels/bench/torch_matmul_coop.py --shapes square_4096,med_qo_proj_fwd,med_kv_proj_fwd,med_proj_dX,med_qo_proj_dW,med_kv_proj_dW,med_head_fwd,med_head_dX,med_head_dW,med_expert_fwd,med_expert_dX,med_expert_dW --json "$OUT/torch-coop.json" 2>&1 | tee "$OUT/torch-coop.txt" | tail -14
  WGPU_NATIVE_LIB=$COOP_LIB bun kernels/bench/grouped-matmul.ts --models mixtral-med --tensor-cores --rounds 2 2>&1 | tee "$OUT/grouped-coop.txt" | tail -8
fi
if want 5 && part "5. bf16 training on the tensor cores beside PyTorch bf16 autocast" && coop_lib; then
  WGPU_NATIVE_LIB=$COOP_LIB bun run bench train --models mixtral-small,mixtral-med --backends webgpu --precision fp32,bf16 --tensor-cores on --steps 12 --warmup 3 2>&1 | tee "$OUT/ours-bf16.txt" | tail -12
  python3 core/bench/torch_train.py --models mixtral-small,mixtral-med --precision bf16 --steps 20 --warmup 3 2>&1 | tee "$OUT/torch-bf16.txt" | tail -4
  # the same bf16 run without tensor cores: what of the loss gap is bf16 storage, what the f16 matmul
  WGPU_NATIVE_LIB=$COOP_LIB bun run bench train --models mixtral-med --backends webgpu --precision fp32,bf16 --tensor-cores off --steps 12 --warmup 3 2>&1 | tee "$OUT/ours-bf16-no-tc.txt" | tail -6
fi
if want 6 && part "6. kernel conformance suite on our wgpu build (this GPU)" && coop_lib; then
  ZEROMOE_WGPU=coop WGPU_NATIVE_LIB=$COOP_LIB bun test kernels/test/ffi kernels/test/webgpu > "$OUT/conformance-coop.txt" 2>&1
  echo "bun test exit $?"; grep -E "^ *[0-9]+ (pass|skip|fail)|^Ran " "$OUT/conformance-coop.txt"; grep -E "^\(fail\)" "$OUT/conformance-coop.txt" | head -20
fi
if [ "${WITH_OFFLOAD:-0}" = 1 ]; then
  part "7. offload under a 4 GiB budget"
  bash examples/h200/offload-mixtral-med.sh "$OUT/offload-med" 2>&1 | tee "$OUT/offload.txt" | tail -24
fi
