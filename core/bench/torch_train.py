"""PyTorch counterpart of `bun run bench train` (core/bench/train.ts): tokens per second of full
training steps (forward, backward, AdamW step) of Hugging Face Transformers' LlamaForCausalLM and
MixtralForCausalLM with the benchmark shapes, in fp32, with bf16 autocast, and with fp16 autocast
plus dynamic loss scaling (torch.amp.GradScaler: initial scale 2^16, growth interval 2000 — DeepSpeed's
fp16 defaults, as in ZeroMoE's fp16 job; gradients are unscaled before clipping).

  python core/bench/torch_train.py [--models llama-small,mixtral-small,mixtral-med,default] [--precision fp32,bf16,fp16]
                                   [--steps 20] [--warmup 3] [--device cuda] [--json out.json]

Shapes (the same as core/bench/train.ts):
  llama-small    vocab 256, hidden 512, intermediate 1024, 8 layers, 8 heads (8 kv), seq 256, micro-batch 16
  mixtral-small  the same + 8 experts, top-2 (output_router_logits, aux coef 0.01)
  mixtral-med    hidden 1024, intermediate 2816, 8 layers, 16 heads (8 kv), 8 experts top-2, seq 1024, micro-batch 8
  default        ZeroMoE's default job: mixtral, hidden 64, intermediate 128, 2 layers, 4 heads,
                 4 experts top-2, seq 64, micro-batch 8

Tokens are random bytes (throughput does not depend on the text; the device machine has no
network). Attention is `sdpa`. AdamW lr 3e-4, betas (0.9, 0.95), weight decay 0.1, fused on CUDA;
gradient clipping 1.0 as in the ZeroMoE job. tokens/s = micro x seq x steps / wall time of the
measured steps (cuda-synchronized), after `warmup` unmeasured steps. Needs torch and transformers.
"""

import argparse
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

SMALL = dict(
    vocab_size=256,
    hidden_size=512,
    intermediate_size=1024,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=8,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    tie_word_embeddings=False,
)

MODELS = {
    "llama-small": ("llama", SMALL, 256, 16),
    "mixtral-small": (
        "mixtral",
        dict(SMALL, num_local_experts=8, num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.01),
        256,
        16,
    ),
    "mixtral-med": (
        "mixtral",
        dict(
            SMALL, hidden_size=1024, intermediate_size=2816, num_attention_heads=16, num_key_value_heads=8,
            max_position_embeddings=1024, num_local_experts=8, num_experts_per_tok=2, output_router_logits=True,
            router_aux_loss_coef=0.01,
        ),
        1024,
        8,
    ),
    "default": (
        "mixtral",
        dict(
            vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=4, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2, output_router_logits=True,
            router_aux_loss_coef=0.01,
        ),
        64,
        8,
    ),
}


def build(name: str, device: str) -> torch.nn.Module:
    kind, cfg, _, _ = MODELS[name]
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**cfg, attn_implementation="sdpa"))
    else:
        model = MixtralForCausalLM(MixtralConfig(**cfg, attn_implementation="sdpa"))
    return model.to(device)


def bench(name: str, precision: str, steps: int, warmup: int, device: str) -> dict:
    torch.manual_seed(1234)
    _, _, seq, micro = MODELS[name]
    model = build(name, device)
    model.train()
    fused = device.startswith("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=fused)
    gen = torch.Generator(device="cpu").manual_seed(7)
    batches = [torch.randint(0, 256, (micro, seq), generator=gen).to(device) for _ in range(8)]
    sync = torch.cuda.synchronize if fused else (lambda: None)
    loss_value = float("nan")
    t0 = 0.0
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    # fp16: dynamic loss scaling (skips steps whose gradients overflow); a no-op scaler otherwise
    scaler = torch.amp.GradScaler("cuda" if fused else "cpu", init_scale=2.0**16, growth_interval=2000, enabled=precision == "fp16")
    for i in range(warmup + steps):
        if i == warmup:
            sync()
            t0 = time.perf_counter()
        ids = batches[i % len(batches)]
        with torch.autocast(device_type="cuda" if fused else "cpu", dtype=dtype, enabled=precision != "fp32"):
            out = model(input_ids=ids, labels=ids)
        scaler.scale(out.loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    loss_value = out.loss.item()  # synchronizes
    sync()
    secs = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    return dict(
        model=name,
        precision=precision,
        device=torch.cuda.get_device_name() if fused else device,
        params=params,
        micro=micro,
        seq=seq,
        steps=steps,
        ms_per_step=1000 * secs / steps,
        tokens_per_s=micro * seq * steps / secs,
        loss=loss_value,
        torch=torch.__version__,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="llama-small,mixtral-small,default")
    ap.add_argument("--precision", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    print("| model | precision | device | parameters | micro x seq | ms/step | tokens/s | loss after |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in a.models.split(","):
        if name not in MODELS:
            print(f"--models: unknown model {name!r}; known: {', '.join(MODELS)}", file=sys.stderr)
            sys.exit(2)
        for prec in a.precision.split(","):
            if prec not in ("fp32", "bf16", "fp16"):
                print(f"--precision: expected fp32, bf16 or fp16, got {prec!r}", file=sys.stderr)
                sys.exit(2)
            r = bench(name, prec, a.steps, a.warmup, a.device)
            rows.append(r)
            print(f"| {r['model']} | {prec} | {r['device']} | {r['params']:,} | {r['micro']} x {r['seq']} | {r['ms_per_step']:.1f} | {r['tokens_per_s']:.0f} | {r['loss']:.4f} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
