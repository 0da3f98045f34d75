#!/usr/bin/env python3
"""Reference values for ZeroMoE's YaRN and LongRoPE tables (core/test/models/rope-scaling-reference.json).

Without arguments: Transformers 5's _compute_yarn_parameters and _compute_longrope_parameters
(modeling_rope_utils.py) transcribed with Python floats (math, float64) instead of torch, for the
cases below; prints the JSON the test reads (inverse frequencies and attention factor per case).

With --transformers (where torch and transformers are installed, e.g. the H200 machine): also runs
Transformers' own ROPE_INIT_FUNCTIONS on the same cases through a LlamaConfig and prints, per case,
the largest relative difference of the inverse frequencies and the attention factors' difference
(expected: ≤ 1e-6, from torch's float32 tables).
"""
import json
import math
import sys


def mscale_of(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn(D, base, rp, max_pos):
    factor = rp["factor"]
    af = rp.get("attention_factor")
    mscale, mad = rp.get("mscale"), rp.get("mscale_all_dim")
    orig = rp.get("original_max_position_embeddings") or max_pos
    if af is None:
        af = mscale_of(factor, mscale) / mscale_of(factor, mad) if (mscale and mad) else mscale_of(factor)
    bf, bs = rp.get("beta_fast") or 32, rp.get("beta_slow") or 1

    def corr(rot):
        return (D * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr(bf), corr(bs)
    if rp.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(D // 2):
        pf = base ** ((2 * i) / D)
        extrapolation = 1 - min(1.0, max(0.0, (i - low) / (high - low)))
        out.append((1.0 / (factor * pf)) * (1 - extrapolation) + (1.0 / pf) * extrapolation)
    return out, af


def longrope(D, base, rp, max_pos, seq_len):
    orig = rp.get("original_max_position_embeddings") or max_pos
    factor = rp.get("factor") or max_pos / orig
    af = rp.get("attention_factor")
    if af is None:
        af = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
    ext = rp["long_factor"] if (seq_len and seq_len > orig) else rp["short_factor"]
    return [1.0 / (ext[i] * base ** ((2 * i) / D)) for i in range(D // 2)], af


SHORT = [1.0, 1.02, 1.07, 1.3, 1.9, 2.6]
LONG = [1.0, 1.25, 2.0, 4.5, 9.0, 16.0]
LR = {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG, "original_max_position_embeddings": 4096}
# name: (head dim, base, rope parameters, max_position_embeddings, positions of the forward)
CASES = {
    "deepseek_v3": (64, 10000, {"rope_type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}, 163840, 16),
    "qwen_yarn4": (128, 1e6, {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32768}, 131072, 16),
    "yarn_untruncated": (46, 500000, {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 8192, "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "truncate": False}, 65536, 16),
    "yarn_attention_factor": (10, 10000, {"rope_type": "yarn", "factor": 2.5, "attention_factor": 0.8}, 2048, 16),
    "longrope_short": (12, 10000, LR, 131072, 100),
    "longrope_long": (12, 10000, LR, 131072, 5000),
    "longrope_factor": (12, 10000, {**LR, "factor": 2.0}, 131072, 100),
}


def ours(D, base, rp, max_pos, positions):
    if rp["rope_type"] == "yarn":
        return yarn(D, base, rp, max_pos)
    return longrope(D, base, rp, max_pos, positions)


def with_transformers():
    import torch
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for name, (D, base, rp, max_pos, positions) in CASES.items():
        cfg = LlamaConfig(hidden_size=D * 2, num_attention_heads=2, head_dim=D, max_position_embeddings=max_pos, rope_parameters={**rp, "rope_theta": base})
        fn = ROPE_INIT_FUNCTIONS[rp["rope_type"]]
        inv, af = fn(cfg, "cpu", seq_len=positions if rp["rope_type"] == "longrope" and positions > rp.get("original_max_position_embeddings", max_pos) else None)
        ref, ref_af = ours(D, base, rp, max_pos, positions)
        rel = max(abs(float(a) - b) / b for a, b in zip(inv.to(torch.float64).tolist(), ref))
        print(f"{name}: inv_freq max relative difference {rel:.2e}, attention_factor {float(af):.9f} vs {ref_af:.9f}")


if __name__ == "__main__":
    if "--transformers" in sys.argv:
        with_transformers()
    else:
        out = {}
        for name, (D, base, rp, max_pos, positions) in CASES.items():
            inv, af = ours(D, base, rp, max_pos, positions)
            out[name] = {"head_dim": D, "rope_theta": base, "rope_scaling": rp, "max_position_embeddings": max_pos, "positions": positions, "inv_freq": inv, "attention_factor": af}
        print(json.dumps(out, indent=1))
