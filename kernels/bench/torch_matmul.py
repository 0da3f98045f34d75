"""PyTorch reference for `bun run bench kernels`: matmul TFLOP/s and elementwise GB/s on the same GPU.

Usage: python3 kernels/bench/torch_matmul.py --sizes 256,512,4096 [--elementwise 67108864] [--json]

fp32 is measured with TF32 disabled (torch.backends.cuda.matmul.allow_tf32 = False, matmul precision
"highest"), so it is true fp32 FMA throughput; fp16 is plain torch.float16 matmul (tensor cores,
fp32 accumulation). Timing: CUDA events around `reps` back-to-back calls after warm-up, median of
`trials` trials. Elementwise: y = 2·x over n f32 elements (4 bytes read + 4 written per element).
Prints one JSON object on stdout with --json, else a table.
"""
import argparse
import json
import sys

from cuda_timing import seconds_per_call, warm_up
from cuda_torch import import_cuda_torch


def time_cuda(fn, reps, trials, torch):
    warm_up(fn, torch)
    return seconds_per_call(fn, torch, reps, trials)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--elementwise", type=int, default=1 << 26)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch = import_cuda_torch()
    if torch is None:
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "matmul": [], "elementwise": None}
    for dt_name in a.dtypes.split(","):
        dt = {"fp32": torch.float32, "fp16": torch.float16}[dt_name]
        for n in [int(s) for s in a.sizes.split(",")]:
            x = torch.randn(n, n, device=dev, dtype=dt)
            y = torch.randn(n, n, device=dev, dtype=dt)
            z = torch.empty(n, n, device=dev, dtype=dt)
            flop = 2.0 * n * n * n
            reps = max(3, min(200, int(2e11 / flop)))
            t = time_cuda(lambda: torch.matmul(x, y, out=z), reps, a.trials, torch)
            res["matmul"].append({"dtype": dt_name, "size": n, "seconds": t, "gflops": flop / t / 1e9})
            del x, y, z
    n = a.elementwise
    if n > 0:
        x = torch.randn(n, device=dev)
        y = torch.empty(n, device=dev)
        t = time_cuda(lambda: torch.mul(x, 2.0, out=y), 20, a.trials, torch)
        res["elementwise"] = {"n": n, "seconds": t, "gbps": 8.0 * n / t / 1e9}
    if a.json:
        print(json.dumps(res))
    else:
        print(res["device"], "torch", res["torch"])
        for r in res["matmul"]:
            print(f'{r["dtype"]} {r["size"]:>5}  {r["gflops"]:10.0f} GFLOP/s')
        if res["elementwise"]:
            print(f'elementwise y=2x n={n}: {res["elementwise"]["gbps"]:.0f} GB/s')
    return 0


if __name__ == "__main__":
    sys.exit(main())
