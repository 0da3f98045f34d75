"""PyTorch counterpart of core/bench/matmul-shapes.ts: the same named matmul shapes (fp32, TF32 off),
CUDA-event time per call after warm-up, TFLOP/s.

  python core/bench/torch_matmul_shapes.py [--reps 20]

transA means A is stored [K, M] (used as A.t()), transB means B is stored [N, K]; acc shapes run
torch.addmm(C, A, B, out=C) (the parameter-gradient accumulation), others torch.matmul(A, B, out=C).
"""
import argparse
import json

import torch

SHAPES = {
    "qo_proj_fwd": (8192, 1024, 1024, False, True, False),
    "kv_proj_fwd": (8192, 512, 1024, False, True, False),
    "proj_dX": (8192, 1024, 1024, False, False, False),
    "qo_proj_dW": (1024, 1024, 8192, True, False, True),
    "kv_proj_dW": (512, 1024, 8192, True, False, True),
    "head_fwd": (8192, 256, 1024, False, True, False),
    "head_dX": (8192, 1024, 256, False, False, False),
    "head_dW": (256, 1024, 8192, True, False, True),
    "expert_fwd": (2048, 2816, 1024, False, True, False),
    "expert_dX": (2048, 1024, 2816, False, False, False),
    "expert_dW": (2816, 1024, 2048, True, False, True),
    "square_4096": (4096, 4096, 4096, False, False, False),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    for name, (M, N, K, ta, tb, acc) in SHAPES.items():
        A = torch.rand(K, M, device="cuda") if ta else torch.rand(M, K, device="cuda")
        B = torch.rand(N, K, device="cuda") if tb else torch.rand(K, N, device="cuda")
        C = torch.rand(M, N, device="cuda")
        opA = A.t() if ta else A
        opB = B.t() if tb else B
        fn = (lambda: torch.addmm(C, opA, opB, out=C)) if acc else (lambda: torch.matmul(opA, opB, out=C))
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(a.reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        ms = s.elapsed_time(e) / a.reps
        print(json.dumps(dict(name=name, M=M, N=N, K=K, torch_ms=round(ms, 4), torch_tflops=round(2 * M * N * K / ms / 1e9, 2), device=torch.cuda.get_device_name())))


if __name__ == "__main__":
    main()
