"""torch.optim.AdamW(foreach=True) on the CPU over N fp32 elements: seconds per step (best of R).

Usage: python3 torch_adamw.py N R THREADS -> prints one JSON line {"seconds":..., "torch":..., "threads":...}
(The offload bench runs it in the same run as the host AdamW and memcpy measurements.)
"""
import json
import sys
import time

import torch

n, reps, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
p = torch.nn.Parameter(torch.rand(n, generator=g) - 0.5)
p.grad = torch.rand(n, generator=g) - 0.5
opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=True)
opt.step()  # allocates m and v
best = float("inf")
for _ in range(reps):
    t0 = time.perf_counter()
    opt.step()
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "torch": torch.__version__, "threads": threads}))
