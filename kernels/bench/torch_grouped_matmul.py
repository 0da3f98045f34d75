"""PyTorch fp32 reference for kernels/bench/grouped-matmul.ts: the same grouped expert products.

Usage: python3 kernels/bench/torch_grouped_matmul.py [--models mixtral-med,mixtral-small] [--json]

Shapes and routing as in grouped-matmul.ts (R = tokens·top-k rows routed to G = 8 experts with the
same seeded skewed routing, so the group sizes are identical): fwd_up out = x·W_gᵀ (W_g [I,H]),
fwd_down (W_g [H,I]), dx_up dx = dy·W_g, dx_down, dw_up dW_g = dy[rows_g]ᵀ·x[rows_g], dw_down.
Per product: `loop` = one torch.matmul per expert over its row slice (what an eager MoE does), and,
on G equal groups of R/G rows, `bmm` (torch.bmm, forward/dX layouts; dW as bmm of the transposed
slices) and `grouped_mm` (torch._grouped_mm with the uneven offsets, where this build has it and
accepts fp32; else the reason is printed). fp32 with TF32 off (matmul precision "highest").
Timing: CUDA events around `reps` back-to-back calls after warm-up, median of 5 trials.
TFLOP/s = 2·R·N·K / time. Prints one JSON line per product.
"""
import argparse
import json

from cuda_timing import one_call_seconds, seconds_per_call, warm_up
from cuda_torch import import_cuda_torch

MODELS = {
    "mixtral-med": dict(tokens=8 * 1024, H=1024, I=2816, G=8, topK=2),
    "mixtral-small": dict(tokens=16 * 256, H=512, I=1024, G=8, topK=2),
}


def xorshift(seed):
    s = seed & 0xFFFFFFFF or 1
    while True:
        s ^= (s << 13) & 0xFFFFFFFF
        s ^= s >> 17
        s ^= (s << 5) & 0xFFFFFFFF
        yield s / 2**32


def routed_offsets(tokens, G, top_k, seed):
    """The same routing as routedOffsets in grouped-matmul.ts (same xorshift32 stream)."""
    r = xorshift(seed)
    weight = [1 + 2 * next(r) for _ in range(G)]
    total = sum(weight)
    counts = [0] * G
    for _ in range(tokens):
        taken = []
        while len(taken) < top_k:
            u = next(r) * total
            e = 0
            while e < G - 1 and u >= weight[e]:
                u -= weight[e]
                e += 1
            if e not in taken:
                taken.append(e)
        for e in taken:
            counts[e] += 1
    off = [0]
    for c in counts:
        off.append(off[-1] + c)
    return off


def time_cuda(fn, torch, trials=5, target_s=0.04):
    warm_up(fn, torch)
    probe = one_call_seconds(fn, torch)
    reps = max(5, min(500, int(target_s / probe) + 1))
    return seconds_per_call(fn, torch, reps, trials)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    a = ap.parse_args()
    torch = import_cuda_torch()
    if torch is None:
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
    for model in a.models.split(","):
        m = MODELS[model]
        H, I, G = m["H"], m["I"], m["G"]
        R = m["tokens"] * m["topK"]
        off = routed_offsets(m["tokens"], G, m["topK"], 11)
        sizes = [off[g + 1] - off[g] for g in range(G)]
        per = R // G
        g_gen = torch.Generator(device=dev).manual_seed(0)
        # name, kind, out features N, in features K (rows) / M, N (wgrad), weight stored transposed
        prods = [
            ("fwd_up", "rows", I, H, True), ("fwd_down", "rows", H, I, True),
            ("dx_up", "rows", H, I, False), ("dx_down", "rows", I, H, False),
            ("dw_up", "wgrad", I, H, False), ("dw_down", "wgrad", H, I, False),
        ]
        for name, kind, A, B, trans_b in prods:
            row = {"model": model, "product": name, "R": R, "group_sizes": sizes}
            if kind == "rows":
                N, K = A, B
                flops = 2 * R * N * K
                x = torch.rand(R, K, device=dev, generator=g_gen) * 2 - 1
                w = torch.rand(G, N, K, device=dev, generator=g_gen) * 2 - 1 if trans_b else torch.rand(G, K, N, device=dev, generator=g_gen) * 2 - 1
                wt = w.transpose(1, 2) if trans_b else w  # [G, K, N] view
                y = torch.empty(R, N, device=dev)

                def loop():
                    for g in range(G):
                        if off[g + 1] > off[g]:
                            torch.matmul(x[off[g]:off[g + 1]], wt[g], out=y[off[g]:off[g + 1]])

                xe = x[: per * G].view(G, per, K)
                ye = y[: per * G].view(G, per, N)

                def bmm():
                    torch.bmm(xe, wt, out=ye)

                row.update(N=N, K=K, transB=trans_b)
            else:
                M, N = A, B
                flops = 2 * R * M * N
                dy = torch.rand(R, M, device=dev, generator=g_gen) * 2 - 1
                x = torch.rand(R, N, device=dev, generator=g_gen) * 2 - 1
                dw = torch.zeros(G, M, N, device=dev)

                def loop():
                    for g in range(G):
                        if off[g + 1] > off[g]:
                            dw[g].addmm_(dy[off[g]:off[g + 1]].t(), x[off[g]:off[g + 1]])

                dye = dy[: per * G].view(G, per, M)
                xe = x[: per * G].view(G, per, N)

                def bmm():
                    dw.baddbmm_(dye.transpose(1, 2), xe)

                row.update(M=M, N=N)
            t = time_cuda(loop, torch)
            row.update(loop_ms=round(t * 1e3, 4), loop_tflops=round(flops / t / 1e12, 2))
            t = time_cuda(bmm, torch)
            row.update(bmm_equal_ms=round(t * 1e3, 4), bmm_equal_tflops=round(flops / t / 1e12, 2))
            gm = getattr(torch, "_grouped_mm", None)
            if gm is None:
                row["grouped_mm"] = "absent in this build"
            else:
                try:
                    offs = torch.tensor(off[1:], device=dev, dtype=torch.int32)
                    if kind == "rows":
                        fn = lambda: gm(x, wt, offs=offs)  # noqa: E731
                    else:
                        fn = lambda: gm(dy.t(), x, offs=offs)  # noqa: E731
                    t = time_cuda(fn, torch)
                    row.update(grouped_mm_ms=round(t * 1e3, 4), grouped_mm_tflops=round(flops / t / 1e12, 2))
                except Exception as e:  # noqa: BLE001 — report why (e.g. fp32 not supported)
                    row["grouped_mm"] = f"refused: {str(e).splitlines()[0][:160]}"
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
