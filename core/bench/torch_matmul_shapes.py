"""PyTorch counterpart of core/bench/matmul-shapes.ts: the same named matmul shapes
(core/bench/matmul-shapes.json; fp32, TF32 off), CUDA-event time per call, TFLOP/s.

  python core/bench/torch_matmul_shapes.py [--shapes a,b,...] [--target-ms 40] [--warmup-ms 1500]

transA means A is stored [K, M] (used as A.t()), transB means B is stored [N, K]; accumulate shapes
run torch.addmm(C, opA, opB, out=C) (the parameter-gradient accumulation), others
torch.matmul(opA, opB, out=C). As in the bun bench: the GPU is kept busy for --warmup-ms first, each
shape runs 3 untimed calls, then enough timed calls for about --target-ms (at least 5).
"""
import argparse
import json
import os
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_shapes() -> dict:
    with open(os.path.join(HERE, "matmul-shapes.json")) as f:
        raw = json.load(f)
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def main() -> None:
    shapes = load_shapes()
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=",".join(shapes))
    ap.add_argument("--target-ms", type=float, default=40.0)
    ap.add_argument("--warmup-ms", type=float, default=1500.0)
    a = ap.parse_args()
    names = a.shapes.split(",")
    for n in names:
        if n not in shapes:
            raise SystemExit(f"--shapes: unknown shape {n!r}; expected some of {', '.join(shapes)}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    # keep the GPU busy so its clocks are up before timing
    X = torch.rand(4096, 4096, device="cuda")
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < a.warmup_ms:
        for _ in range(4):
            X @ X
        torch.cuda.synchronize()
    del X
    for name in names:
        M, N, K, ta, tb, acc = shapes[name]
        A = torch.rand(K, M, device="cuda") * 2 - 1 if ta else torch.rand(M, K, device="cuda") * 2 - 1
        B = torch.rand(N, K, device="cuda") * 2 - 1 if tb else torch.rand(K, N, device="cuda") * 2 - 1
        C = torch.rand(M, N, device="cuda")
        opA = A.t() if ta else A
        opB = B.t() if tb else B
        fn = (lambda: torch.addmm(C, opA, opB, out=C)) if acc else (lambda: torch.matmul(opA, opB, out=C))
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(3):
            fn()
        e.record()
        torch.cuda.synchronize()
        probe = s.elapsed_time(e) / 3
        reps = max(5, min(500, int(a.target_ms / max(probe, 1e-3)) + 1))
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        ms = s.elapsed_time(e) / reps
        print(json.dumps(dict(name=name, M=M, N=N, K=K, reps=reps, torch_ms=round(ms, 4), torch_tflops=round(2 * M * N * K / ms / 1e9, 2), device=torch.cuda.get_device_name())))


if __name__ == "__main__":
    main()
