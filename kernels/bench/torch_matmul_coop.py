"""PyTorch reference for kernels/bench/matmul-coop.ts: torch.matmul TFLOP/s at the same shapes
(core/bench/matmul-shapes.json: [M, N, K, transA, transB, accumulate]) in fp16, bf16 and fp32.

Usage: python3 kernels/bench/torch_matmul_coop.py --shapes square_4096,med_expert_fwd [--json PATH]

fp32 with TF32 disabled (true fp32 FMA); fp16/bf16 plain torch.matmul (tensor cores, fp32
accumulation). Operands are created in their stored layout and transposed views are passed, as the
training step does; accumulate shapes use out.addmm_ (beta 1). Timing: CUDA events around
back-to-back calls (about 50 ms) after warm-up, median of 5 trials.
"""
import argparse
import json
import os
import sys

from cuda_timing import one_call_seconds, seconds_per_call, warm_up
from cuda_torch import import_cuda_torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--dtypes", default="fp16,bf16,fp32")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch = import_cuda_torch()
    if torch is None:  # the reason was printed as {"error": ...}
        sys.exit(2)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    shapes = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "core", "bench", "matmul-shapes.json")))
    dev = torch.device("cuda")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "matmuls": []}
    for name in a.shapes.split(","):
        M, N, K, ta, tb, acc = shapes[name]
        for dn in a.dtypes.split(","):
            dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dn]
            A = torch.rand((K, M) if ta else (M, K), device=dev, dtype=dt) * 2 - 1
            B = torch.rand((N, K) if tb else (K, N), device=dev, dtype=dt) * 2 - 1
            Av = A.t() if ta else A
            Bv = B.t() if tb else B
            out = torch.zeros(M, N, device=dev, dtype=dt)
            fn = (lambda: out.addmm_(Av, Bv)) if acc else (lambda: torch.matmul(Av, Bv, out=out))
            warm_up(fn, torch)
            one = one_call_seconds(fn, torch)
            reps = max(5, min(5000, int(0.05 / one)))
            t = seconds_per_call(fn, torch, reps, 5)
            res["matmuls"].append({"name": name, "dtype": dn, "seconds": t, "tflops": 2.0 * M * N * K / t / 1e12})
            print(f"torch {name:18} {dn} {M}x{N}x{K} {'T' if ta else 'N'}{'T' if tb else 'N'}{'+' if acc else ' '} {2.0 * M * N * K / t / 1e12:8.1f} TFLOP/s  {t * 1e3:.3f} ms")
            del A, B, out
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
