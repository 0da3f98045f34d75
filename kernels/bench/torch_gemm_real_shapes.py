"""cuBLAS bf16/fp16 beside kernels/bench/gemm-real-shapes.ts: the same products (4096³, Llama-3-8B
dense layers, Mixtral-8x7B and Qwen3-30B-A3B expert products forward/dX/dW), run by that bench
with --torch, or alone:

    python3 kernels/bench/torch_gemm_real_shapes.py [--products square/square_4096,llama3-8b/q_o_fwd,...]

Dense: torch.matmul in the same layout (transposes as views, dW accumulated with addmm_'s
beta = 1). Grouped: one torch.matmul per expert over its row slice (the routing of
grouped-matmul.ts, same seed, so identical group sizes), and torch._grouped_mm (bf16) where this
build has it. Timing: CUDA events around back-to-back calls after warm-up, median of 5;
TFLOP/s = FLOPs / time. One JSON line per product: {"product": "model/name", "bf16": …, "fp16": …,
"bf16_grouped_mm": …}.
"""
import argparse
import json

from cuda_timing import one_call_seconds, seconds_per_call, warm_up
from cuda_torch import import_cuda_torch
from torch_grouped_matmul import routed_offsets

T = 8192


def products():
    H, I, KV = 4096, 14336, 1024
    d = lambda model, name, M, N, K, ta=False, tb=False, acc=False: dict(model=model, name=name, kind="dense", M=M, N=N, K=K, ta=ta, tb=tb, acc=acc)
    out = [
        d("square", "square_4096", 4096, 4096, 4096),
        d("llama3-8b", "q_o_fwd", T, H, H, tb=True),
        d("llama3-8b", "kv_fwd", T, KV, H, tb=True),
        d("llama3-8b", "gate_up_fwd", T, I, H, tb=True),
        d("llama3-8b", "down_fwd", T, H, I, tb=True),
        d("llama3-8b", "q_o_dX", T, H, H),
        d("llama3-8b", "kv_dX", T, H, KV),
        d("llama3-8b", "gate_up_dX", T, H, I),
        d("llama3-8b", "down_dX", T, I, H),
        d("llama3-8b", "q_o_dW", H, H, T, ta=True, acc=True),
        d("llama3-8b", "kv_dW", KV, H, T, ta=True, acc=True),
        d("llama3-8b", "gate_up_dW", I, H, T, ta=True, acc=True),
        d("llama3-8b", "down_dW", H, I, T, ta=True, acc=True),
    ]
    for model, G, k, Hm, Im in [("mixtral-8x7b", 8, 2, 4096, 14336), ("qwen3-30b-a3b", 128, 8, 2048, 768)]:
        R = T * k
        g = dict(model=model, G=G, R=R, topK=k)
        out += [
            dict(g, name="fwd_up", kind="rows", N=Im, K=Hm, tb=True),
            dict(g, name="fwd_down", kind="rows", N=Hm, K=Im, tb=True),
            dict(g, name="dx_up", kind="rows", N=Hm, K=Im, tb=False),
            dict(g, name="dx_down", kind="rows", N=Im, K=Hm, tb=False),
            dict(g, name="dw_up", kind="wgrad", M=Im, N=Hm),
            dict(g, name="dw_down", kind="wgrad", M=Hm, N=Im),
        ]
    return out


def time_cuda(fn, torch, target_s=0.02):
    warm_up(fn, torch)
    probe = one_call_seconds(fn, torch)
    reps = max(3, min(200, int(target_s / probe) + 1))
    return seconds_per_call(fn, torch, reps, 5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--products", default="")
    a = ap.parse_args()
    torch = import_cuda_torch()
    if torch is None:
        return 1
    dev = torch.device("cuda")
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}), flush=True)
    want = set(filter(None, a.products.split(",")))
    # warm the GPU (clocks up) for ~2 s
    x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    for _ in range(60):
        x @ x
    torch.cuda.synchronize()
    for p in products():
        key = f"{p['model']}/{p['name']}"
        if want and key not in want:
            continue
        row = {"product": key}
        for dt_name, dt in [("bf16", torch.bfloat16), ("fp16", torch.float16)]:
            r = lambda *s: torch.randn(*s, device=dev, dtype=dt)
            if p["kind"] == "dense":
                M, N, K = p["M"], p["N"], p["K"]
                A = r(K, M).t() if p["ta"] else r(M, K)
                B = r(N, K).t() if p["tb"] else r(K, N)
                C = r(M, N)
                fn = (lambda: C.addmm_(A, B)) if p["acc"] else (lambda: torch.matmul(A, B, out=C))
                flops = 2 * M * N * K
            else:
                G, R = p["G"], p["R"]
                off = routed_offsets(T, G, p["topK"], 11)
                if p["kind"] == "rows":
                    N, K = p["N"], p["K"]
                    X, W, Y = r(R, K), (r(G, N, K) if p["tb"] else r(G, K, N)), r(R, N)
                    ws = [W[g].t() if p["tb"] else W[g] for g in range(G)]

                    def fn(X=X, ws=ws, Y=Y, off=off, G=G):
                        for g in range(G):
                            torch.matmul(X[off[g]:off[g + 1]], ws[g], out=Y[off[g]:off[g + 1]])
                    flops = 2 * R * N * K
                else:
                    M, N = p["M"], p["N"]
                    DY, X, DW = r(R, M), r(R, N), r(G, M, N)

                    def fn(DY=DY, X=X, DW=DW, off=off, G=G):
                        for g in range(G):
                            DW[g].addmm_(DY[off[g]:off[g + 1]].t(), X[off[g]:off[g + 1]])
                    flops = 2 * R * M * N
                if dt_name == "bf16" and hasattr(torch, "_grouped_mm"):
                    try:
                        offs = torch.tensor(off[1:], device=dev, dtype=torch.int32)
                        if p["kind"] == "rows":
                            Wg = W.transpose(1, 2) if p["tb"] else W
                            gfn = lambda X=X, Wg=Wg, offs=offs: torch._grouped_mm(X, Wg, offs=offs)
                        else:
                            gfn = lambda DY=DY, X=X, offs=offs: torch._grouped_mm(DY.t(), X, offs=offs)
                        row["bf16_grouped_mm"] = round(flops / time_cuda(gfn, torch) / 1e12, 1)
                    except Exception as e:  # noqa: BLE001 (report why, keep the other columns)
                        row["bf16_grouped_mm_error"] = str(e).split("\n")[0][:120]
            row[dt_name] = round(flops / time_cuda(fn, torch) / 1e12, 1)
            del fn
            torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
