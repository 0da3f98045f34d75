"""PyTorch counterpart of core/bench/attention-bench.ts: causal scaled-dot-product attention
forward and backward, fp32, at the training benchmarks' shapes.

  python core/bench/torch_attention.py [--shapes 16x256x8x8x64,8x1024x16x8x64] [--reps 20]

A shape is BxSxHxHkvxD. Uses torch.nn.functional.scaled_dot_product_attention(is_causal=True,
enable_gqa=True) on [B, H, S, D] tensors (the layout SDPA wants; Transformers transposes to it too),
whichever fp32 backend PyTorch picks, TF32 off. Timing: CUDA events around `reps` calls after
warm-up; backward alone = (forward + backward) - forward. FLOPs as in attention-bench.ts
(forward 4·B·H·S²·D/2, backward 10·B·H·S²·D/2).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

# the CUDA-event timing shared with the kernel references (kernels/bench/cuda_timing.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "kernels", "bench"))
from cuda_timing import seconds_per_call, warm_up  # noqa: E402


def timed(fn, reps):
    """Milliseconds per call of `fn`: CUDA events around `reps` calls after 3 warm-up calls."""
    warm_up(fn, torch)
    return seconds_per_call(fn, torch, reps, trials=1) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16x256x8x8x64,8x1024x16x8x64")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    for shape in a.shapes.split(","):
        B, S, H, Hkv, D = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(1)
        q = torch.randn(B, H, S, D, device="cuda", generator=g, requires_grad=True)
        k = torch.randn(B, Hkv, S, D, device="cuda", generator=g, requires_grad=True)
        v = torch.randn(B, Hkv, S, D, device="cuda", generator=g, requires_grad=True)
        do = torch.randn(B, H, S, D, device="cuda", generator=g)

        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

        def fwd_bwd():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            torch.autograd.grad(o, (q, k, v), do)

        f_ms = timed(fwd, a.reps)
        fb_ms = timed(fwd_bwd, a.reps)
        b_ms = fb_ms - f_ms
        ff = 4 * B * H * S * S * D / 2
        bf = 10 * B * H * S * S * D / 2
        print(json.dumps(dict(shape=shape, device=torch.cuda.get_device_name(), torch=torch.__version__,
                              fwd_ms=round(f_ms, 3), fwd_tflops=round(ff / f_ms / 1e9, 2),
                              bwd_ms=round(b_ms, 3), bwd_tflops=round(bf / b_ms / 1e9, 2))))


if __name__ == "__main__":
    main()
