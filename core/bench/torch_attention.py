"""PyTorch counterpart of core/bench/attention-bench.ts: causal scaled-dot-product attention
forward and backward, fp32 (default) or bf16/fp16 (--dtype), at the training benchmarks' shapes.

  python core/bench/torch_attention.py [--shapes 16x256x8x8x64,8x1024x16x8x64] [--reps 20] [--dtype fp32|bf16|fp16]

A shape is BxSxHxHkvxD. Uses torch.nn.functional.scaled_dot_product_attention(is_causal=True,
enable_gqa=True) on [B, H, S, D] tensors (the layout SDPA wants; Transformers transposes to it too),
whichever backend PyTorch picks for the dtype (bf16/fp16: FlashAttention-2 or cuDNN on an H200;
the printed `backend` says which SDPA kernels are enabled), TF32 off for fp32. Timing: CUDA events around `reps` calls after
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
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    a = ap.parse_args()
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    for shape in a.shapes.split(","):
        B, S, H, Hkv, D = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(1)
        q = torch.randn(B, H, S, D, device="cuda", generator=g, dtype=dt, requires_grad=True)
        k = torch.randn(B, Hkv, S, D, device="cuda", generator=g, dtype=dt, requires_grad=True)
        v = torch.randn(B, Hkv, S, D, device="cuda", generator=g, dtype=dt, requires_grad=True)
        do = torch.randn(B, H, S, D, device="cuda", generator=g, dtype=dt)

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
        be = [n for n, on in (("flash", torch.backends.cuda.flash_sdp_enabled()), ("cudnn", torch.backends.cuda.cudnn_sdp_enabled()),
                              ("mem_efficient", torch.backends.cuda.mem_efficient_sdp_enabled()), ("math", torch.backends.cuda.math_sdp_enabled())) if on]
        print(json.dumps(dict(impl="torch_sdpa", dtype=a.dtype, backends_enabled=be, shape=shape, device=torch.cuda.get_device_name(), torch=torch.__version__,
                              fwd_ms=round(f_ms, 3), fwd_tflops=round(ff / f_ms / 1e9, 2),
                              bwd_ms=round(b_ms, 3), bwd_tflops=round(bf / b_ms / 1e9, 2))))


if __name__ == "__main__":
    main()
