"""PyTorch side of core/bench/fused-head.ts: the float64 reference of the LM head + cross-entropy
on the bench's exact data, the errors of ZeroMoE's fused head against it, and PyTorch's own
unfused head (F.linear then F.cross_entropy, as Transformers computes the loss) timed in fp32
(TF32 off) and under bf16 autocast (logits upcast to f32 before the loss), with peak memory.

  python core/bench/torch_fused_head.py --dir /tmp/zm-fused-head [--reps 3] [--no-timing]

--dir holds what fused-head.ts wrote: hidden.f32 [T, H], weight.f32 [V, H], targets.i32 [T]
(-100 = ignored), dh.f32, dw.f32 (ZeroMoE's gradients of g = 1) and meta.json (T, H, V, z-loss
coefficient, numValid, ZeroMoE's loss, the tolerances). Reference: loss = mean over scored rows of
lse - x_t + z*lse^2, and its gradients, in float64 on the GPU (CPU if there is none).
Exit status 1 when an error exceeds its tolerance.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch


def load(d: str, name: str, dtype, shape):
    a = np.fromfile(os.path.join(d, name), dtype=dtype)
    if a.size != int(np.prod(shape)):
        raise SystemExit(f"{name}: {a.size} elements, expected {shape}")
    return torch.from_numpy(a.reshape(shape))


def reference(h, w, t, z, n_valid):
    """float64 loss and gradients of mean CE (+ z-loss) over rows with t != -100."""
    h = h.double()
    w = w.double()
    logits = h @ w.T
    lse = torch.logsumexp(logits, dim=1)
    mask = t != -100
    tt = torch.where(mask, t, torch.zeros_like(t)).long()
    xt = logits.gather(1, tt[:, None])[:, 0]
    per = (lse - xt + z * lse * lse) * mask
    n = max(n_valid, 1)
    loss = per.sum() / n
    p = torch.exp(logits - lse[:, None]) * (1 + 2 * z * lse)[:, None]
    p[torch.arange(p.shape[0], device=p.device), tt] -= 1
    p *= (mask.double() / n)[:, None]
    del logits
    dh = p @ w
    dw = p.T @ h
    return loss.item(), dh, dw


def normwise(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def time_torch(h, w, t, precision: str, reps: int):
    """ms per forward + backward of PyTorch's unfused head, peak memory above the inputs."""
    dev = h.device
    hv = h.clone().requires_grad_(True)
    wv = w.clone().requires_grad_(True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def step():
        hv.grad = None
        wv.grad = None
        if precision == "bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = torch.nn.functional.linear(hv, wv)
            loss = torch.nn.functional.cross_entropy(logits.float(), t.long(), ignore_index=-100)
        else:
            logits = torch.nn.functional.linear(hv, wv)
            loss = torch.nn.functional.cross_entropy(logits, t.long(), ignore_index=-100)
        loss.backward()

    step()
    torch.cuda.synchronize(dev)
    base = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    start.record()
    for _ in range(reps):
        step()
    end.record()
    torch.cuda.synchronize(dev)
    return start.elapsed_time(end) / reps, (torch.cuda.max_memory_allocated(dev) - base) / 2**30


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-timing", action="store_true")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.dir, "meta.json")))
    T, H, V, z = meta["T"], meta["H"], meta["V"], meta["z"]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    h = load(a.dir, "hidden.f32", np.float32, (T, H)).to(dev)
    w = load(a.dir, "weight.f32", np.float32, (V, H)).to(dev)
    t = load(a.dir, "targets.i32", np.int32, (T,)).to(dev)
    n_valid = int((t != -100).sum().item())
    if n_valid != meta["numValid"]:
        raise SystemExit(f"targets: {n_valid} scored rows, meta.json says {meta['numValid']}")
    loss, dh_ref, dw_ref = reference(h, w, t, z, n_valid)
    dh = load(a.dir, "dh.f32", np.float32, (T, H)).to(dev)
    dw = load(a.dir, "dw.f32", np.float32, (V, H)).to(dev)
    e_loss = abs(meta["loss"] - loss) / abs(loss)
    e_dh = normwise(dh, dh_ref)
    e_dw = normwise(dw, dw_ref)
    ok = e_loss <= meta["lossTol"] and e_dh <= meta["gradTol"] and e_dw <= meta["gradTol"]
    print(f"float64 reference on {dev}: loss {loss:.8f}; ZeroMoE {meta['loss']:.8f} (rel err {e_loss:.2e}), dh normwise err {e_dh:.2e}, dW {e_dw:.2e} -> {'PASS' if ok else 'FAIL'} (tolerances {meta['lossTol']}, {meta['gradTol']})")
    del dh_ref, dw_ref, dh, dw
    if not a.no_timing and dev.type == "cuda" and z == 0:
        for precision in ("fp32", "bf16"):
            try:
                ms, gib = time_torch(h, w, t, precision, a.reps)
                print(f"PyTorch {torch.__version__} unfused head {precision}: {ms:.1f} ms forward+backward, peak {gib:.2f} GiB above the inputs")
            except torch.cuda.OutOfMemoryError:
                print(f"PyTorch unfused head {precision}: out of memory")
            torch.cuda.empty_cache()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
