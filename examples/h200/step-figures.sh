#!/usr/bin/env bash
# The H200 figures of docs/performance.md in one device command (issues 11, 12, 13), each part
# writing its output under $OUT (default /tmp/step-figures) so a partial run still reports:
#   1. PyTorch eager fp32 beside ours (webgpu, fp32) for llama-small, mixtral-small, mixtral-med;
#   2. the per-kernel GPU profile of one mixtral-med forward + backward (defaults);
#   3. offload under a 4 GiB device budget (examples/h200/offload-mixtral-med.sh);
#   4. bf16 on tensor cores with our wgpu build (ZEROMOE_WGPU library from .device-coop/) beside
#      PyTorch bf16 autocast, mixtral-small and mixtral-med.
# Run on the device with carry [".device", ".device-coop"]:
#   source .device/enter.sh && bash examples/h200/step-figures.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/step-figures}
mkdir -p "$OUT"
part() { echo; echo "=== $1"; }
part "1. PyTorch eager fp32"
python3 core/bench/torch_train.py --models llama-small,mixtral-small,mixtral-med --precision fp32 --steps 20 --warmup 3 2>&1 | tee "$OUT/torch-fp32.txt" | tail -6
part "1. ZeroMoE webgpu fp32"
bun run bench train --models llama-small,mixtral-small,mixtral-med --backends webgpu --steps 5 --warmup 2 2>&1 | tee "$OUT/ours-fp32.txt" | tail -6
part "2. mixtral-med per-kernel profile"
bun core/bench/step-profile.ts --model mixtral-med --configs after --steps 2 --top 30 > "$OUT/prof-med.txt" 2>&1; head -8 "$OUT/prof-med.txt" | tail -4
part "3. offload under a 4 GiB budget"
bash examples/h200/offload-mixtral-med.sh "$OUT/offload-med" 2>&1 | tee "$OUT/offload.txt" | tail -24
part "4. bf16 on tensor cores (our wgpu build) and PyTorch bf16 autocast"
if [ -f .device-coop/libzm_wgpu.so.xz ]; then
  xz -dc .device-coop/libzm_wgpu.so.xz > /tmp/device-bin/libzm_wgpu.so
  WGPU_NATIVE_LIB=/tmp/device-bin/libzm_wgpu.so bun run bench train --models mixtral-small,mixtral-med --backends webgpu --precision bf16 --steps 5 --warmup 2 2>&1 | tee "$OUT/ours-bf16.txt" | tail -8
  python3 core/bench/torch_train.py --models mixtral-small,mixtral-med --precision bf16 --steps 20 --warmup 3 2>&1 | tee "$OUT/torch-bf16.txt" | tail -4
else
  echo "no .device-coop/libzm_wgpu.so.xz in the carry: skipped"
fi
