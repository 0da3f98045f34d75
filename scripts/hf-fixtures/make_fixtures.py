#!/usr/bin/env python3
"""Build tiny Hugging Face reference fixtures for ZeroMoE's llama and mixtral models.

For each of LlamaForCausalLM and MixtralForCausalLM (fp32, CPU, seeded) this script:
  1. builds a tiny random model (vocab 64, hidden 32, intermediate 48, 2 layers, 4 heads, 2 kv heads;
     mixtral: 4 experts, top-2, router_aux_loss_coef 0.02, output_router_logits True), eager attention;
  2. replaces the default init (std 0.02, which makes logits and routing nearly uniform) by
     N(0, 1/fan_in) weights, a 2x larger router, and norm weights 1 + N(0, 0.2^2); for mixtral it
     takes the first seed from SEED on where every expert of every layer gets >= MIN_TOKENS top-k
     picks and no top-k choice is within 1e-3 probability of a tie;
  3. runs forward with labels on input ids [2, 7] (one label set to -100), then backward;
  4. writes, under OUT/<model>/:
       config.json            as save_pretrained writes it
       model.safetensors      the Hub layout (for mixtral: block_sparse_moe.experts.N.w1/w2/w3.weight)
       state_dict.safetensors only where model.state_dict() differs from the Hub layout
       inputs.json            input_ids, labels
       expected.safetensors   logits, loss, intermediate activations, router data, all gradients
  and OUT/provenance.json with versions, the command and the self-checks below.

Self-checks (printed, recorded, and fatal when they fail):
  - the Hub-layout file, loaded back with from_pretrained, gives bit-identical logits;
  - each MoE block's output equals a float64 recomputation from the Hub-layout weights
    (softmax over all experts, top-k, renormalise, sum of w2(silu(w1 x) * w3 x));
  - the loss equals a float64 recomputation of cross-entropy (+ coef * aux loss for mixtral);
  - the aux loss equals a recomputation from the captured router logits.

Usage: python3 scripts/hf-fixtures/make_fixtures.py --out core/test/fixtures
Needs torch, transformers and safetensors (run on the GPU machine; it computes on the CPU).
"""

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile

import torch
import torch.nn.functional as F

import safetensors
import transformers
from safetensors.torch import load_file, save_file

SEED = 20261129
BATCH, SEQ = 2, 7
COMMON = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    tie_word_embeddings=False,
    attention_dropout=0.0,
    use_cache=False,
)
MIXTRAL = dict(
    num_local_experts=4,
    num_experts_per_tok=2,
    router_aux_loss_coef=0.02,
    output_router_logits=True,
    router_jitter_noise=0.0,
    sliding_window=None,
)

CHECKS = {}
SEEDS = {}
MIN_TOKENS = 2
FAILURES = []


def check(name, value, tol):
    """Record a self-check: `value` is a max abs difference that must be <= tol."""
    ok = bool(value <= tol)
    CHECKS[name] = {"max_abs_diff": float(value), "tol": tol, "ok": ok}
    print(f"check {name}: max|diff| = {value:.3e} (tol {tol:g}) {'OK' if ok else 'FAIL'}", flush=True)
    if not ok:
        FAILURES.append(name)


def randomize(model, gen):
    """Re-initialise every parameter: matrices N(0, 1/fan_in) (fan_in = last dim), router x2, norms 1 + N(0, 0.04)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                scale = 1.0 / math.sqrt(p.shape[-1])
                if name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight"):
                    scale *= 2.0
                p.copy_(torch.randn(p.shape, generator=gen) * scale)


def moe_block(layer):
    for attr in ("mlp", "block_sparse_moe"):
        m = getattr(layer, attr, None)
        if m is not None and hasattr(m, "gate") and hasattr(m, "experts"):
            return m
    raise RuntimeError(f"no MoE block (mlp/block_sparse_moe with gate and experts) in {type(layer).__name__}")


def first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def to_hub_layout(sd, cfg):
    """Map an in-memory Mixtral state dict to the Hub layout (block_sparse_moe.experts.N.w1/w2/w3)."""
    E, H, I = cfg.num_local_experts, cfg.hidden_size, cfg.intermediate_size
    out = {}
    for k, v in sd.items():
        m = re.fullmatch(r"(model\.layers\.\d+)\.(mlp|block_sparse_moe)\.(.+)", k)
        if m is None:
            out[k] = v
            continue
        pre, rest = m.group(1) + ".block_sparse_moe.", m.group(3)
        if rest == "gate.weight":
            out[pre + "gate.weight"] = v
        elif rest == "experts.gate_up_proj":
            if tuple(v.shape) == (E, H, 2 * I):
                v = v.transpose(1, 2)
            assert tuple(v.shape) == (E, 2 * I, H), f"{k}: unexpected shape {tuple(v.shape)}"
            for e in range(E):
                out[pre + f"experts.{e}.w1.weight"] = v[e, :I, :]
                out[pre + f"experts.{e}.w3.weight"] = v[e, I:, :]
        elif rest == "experts.down_proj":
            if tuple(v.shape) == (E, I, H):
                v = v.transpose(1, 2)
            assert tuple(v.shape) == (E, H, I), f"{k}: unexpected shape {tuple(v.shape)}"
            for e in range(E):
                out[pre + f"experts.{e}.w2.weight"] = v[e]
        elif re.fullmatch(r"experts\.\d+\.w[123]\.weight", rest):
            out[pre + rest] = v
        else:
            raise RuntimeError(f"unknown MoE parameter {k}")
    return {k: v.detach().clone().contiguous().float() for k, v in out.items()}


def contiguous(d):
    return {k: v.detach().clone().contiguous() for k, v in d.items()}


def build(kind, out_dir):
    print(f"=== {kind} ===", flush=True)
    if kind == "llama":
        cfg = transformers.LlamaConfig(**COMMON)
        cls = transformers.LlamaForCausalLM
    else:
        cfg = transformers.MixtralConfig(**COMMON, **MIXTRAL)
        cls = transformers.MixtralForCausalLM
    cfg._attn_implementation = "eager"
    # Mixtral: take the first seed for which every expert of every layer gets at least MIN_TOKENS
    # top-k picks (so every expert has a non-zero gradient) and no top-k choice is a near-tie.
    for seed in range(SEED, SEED + 200):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = cls(cfg).float()
        model.config._attn_implementation = "eager"
        randomize(model, gen)
        model.eval()
        ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen)
        if kind == "llama":
            break
        with torch.no_grad():
            probe = model(input_ids=ids, output_router_logits=True, use_cache=False)
        E, k_top = cfg.num_local_experts, cfg.num_experts_per_tok
        ok = True
        for rl in probe.router_logits:
            p = torch.softmax(rl.double().reshape(-1, E), dim=-1)
            counts = torch.bincount(torch.topk(p, k_top, dim=-1).indices.reshape(-1), minlength=E)
            sp = p.sort(dim=-1, descending=True).values
            if int(counts.min()) < MIN_TOKENS or float((sp[:, k_top - 1] - sp[:, k_top]).min()) < 1e-3:
                ok = False
        if ok:
            break
    else:
        raise RuntimeError("no seed in 200 gave balanced-enough routing")
    print(f"{kind}: seed {seed}; attn implementation: {model.config._attn_implementation}", flush=True)
    SEEDS[kind] = seed

    labels = ids.clone()
    labels[1, 3] = -100

    # Capture intermediates with hooks.
    acts = {}
    hooks = []
    inner = model.model
    hooks.append(inner.embed_tokens.register_forward_hook(lambda m, a, o: acts.__setitem__("embed_out", first(o).detach().clone())))
    for li, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(lambda m, a, o, li=li: acts.__setitem__(f"layer_out.{li}", first(o).detach().clone())))
        if kind == "mixtral":
            blk = moe_block(layer)

            def blk_hook(m, args, kwargs, o, li=li):
                x = args[0] if args else kwargs["hidden_states"]
                acts[f"moe_in.{li}"] = x.detach().clone()
                acts[f"moe_out.{li}"] = first(o).detach().clone()

            hooks.append(blk.register_forward_hook(blk_hook, with_kwargs=True))
    hooks.append(inner.norm.register_forward_hook(lambda m, a, o: acts.__setitem__("norm_out", first(o).detach().clone())))

    kwargs = dict(input_ids=ids, labels=labels, use_cache=False)
    if kind == "mixtral":
        kwargs["output_router_logits"] = True
    out = model(**kwargs)
    out.loss.backward()
    for h in hooks:
        h.remove()

    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    model.save_pretrained(tmp)
    shutil.copy(os.path.join(tmp, "config.json"), os.path.join(out_dir, "config.json"))
    saved = load_file(os.path.join(tmp, "model.safetensors"))
    sd = contiguous(model.state_dict())
    info = {"save_pretrained_keys_sample": sorted(saved.keys())[:6], "state_dict_keys_sample": sorted(sd.keys())[:6]}

    if kind == "llama":
        hub = {k: v.float().contiguous() for k, v in sd.items()}
    else:
        hub = to_hub_layout(sd, cfg)
    hub_names_saved = set(saved.keys()) == set(hub.keys())
    info["save_pretrained_wrote_hub_layout"] = hub_names_saved
    if hub_names_saved:
        check(f"{kind}.save_pretrained_equals_our_hub_conversion", max(float((saved[k].float() - hub[k]).abs().max()) if hub[k].numel() else 0.0 for k in hub), 0.0)
        shutil.copy(os.path.join(tmp, "model.safetensors"), os.path.join(out_dir, "model.safetensors"))
    else:
        print(f"save_pretrained wrote {len(saved)} keys not in the Hub layout (e.g. {sorted(saved.keys())[:3]}); writing the Hub layout ourselves", flush=True)
        save_file(hub, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    differs = set(sd.keys()) != set(hub.keys())
    info["state_dict_differs_from_hub"] = differs
    if differs:
        save_file(sd, os.path.join(out_dir, "state_dict.safetensors"), metadata={"format": "pt"})
    print("layout info:", json.dumps(info), flush=True)

    # Reload the Hub-layout file through from_pretrained: must give identical logits.
    reload_dir = tempfile.mkdtemp()
    shutil.copy(os.path.join(out_dir, "config.json"), reload_dir)
    shutil.copy(os.path.join(out_dir, "model.safetensors"), reload_dir)
    m2 = cls.from_pretrained(reload_dir, attn_implementation="eager").float().eval()
    with torch.no_grad():
        out2 = m2(input_ids=ids, use_cache=False)
    check(f"{kind}.hub_file_reload_logits", float((out2.logits - out.logits.detach()).abs().max()), 0.0)

    # Loss recomputation (float64): mean CE over shifted, non-ignored labels.
    lg = out.logits.detach().double()[:, :-1, :].reshape(-1, cfg.vocab_size)
    tg = labels[:, 1:].reshape(-1)
    lm_loss = F.cross_entropy(lg, tg, ignore_index=-100)
    exp = {"logits": out.logits.detach(), "loss": out.loss.detach().reshape(())}
    exp.update({k: v for k, v in acts.items() if not k.startswith("moe_")})

    if kind == "mixtral":
        E, k_top, H, I = cfg.num_local_experts, cfg.num_experts_per_tok, cfg.hidden_size, cfg.intermediate_size
        raw_logits = []
        min_margin = float("inf")
        for li in range(cfg.num_hidden_layers):
            pre = f"model.layers.{li}.block_sparse_moe."
            x = acts[f"moe_in.{li}"].double().reshape(-1, H)
            rl = x @ hub[pre + "gate.weight"].double().t()
            raw_logits.append(rl)
            probs = torch.softmax(rl, dim=-1)
            sp = probs.sort(dim=-1, descending=True).values
            min_margin = min(min_margin, float((sp[:, k_top - 1] - sp[:, k_top]).min()))
            topv, topi = torch.topk(probs, k_top, dim=-1)
            topv = topv / topv.sum(dim=-1, keepdim=True)
            y = torch.zeros_like(x)
            for e in range(E):
                w1 = hub[pre + f"experts.{e}.w1.weight"].double()
                w2 = hub[pre + f"experts.{e}.w2.weight"].double()
                w3 = hub[pre + f"experts.{e}.w3.weight"].double()
                h = w2 @ (F.silu(x @ w1.t()) * (x @ w3.t())).t()
                wgt = (topv * (topi == e)).sum(dim=-1)
                y += wgt[:, None] * h.t()
            check(f"mixtral.moe_block_{li}_vs_float64_reference", float((y - acts[f"moe_out.{li}"].double().reshape(-1, H)).abs().max()), 1e-5)
            exp[f"router_logits.{li}"] = rl.float()
            exp[f"topk_experts.{li}"] = topi.to(torch.int32)
            exp[f"topk_weights.{li}"] = topv.float()
            if getattr(out, "router_logits", None) is None or getattr(out, "aux_loss", None) is None:
                raise RuntimeError("MixtralForCausalLM returned no router_logits/aux_loss with output_router_logits=True")
            hf_rl = out.router_logits[li].detach().reshape(-1, E)
            exp[f"hf_router_logits.{li}"] = hf_rl
            d = float((hf_rl.double() - rl).abs().max())
            print(f"layer {li}: HF router_logits vs gate(x): max|diff| {d:.3e}", flush=True)
            CHECKS[f"mixtral.hf_router_logits_{li}_equal_gate_output"] = {"max_abs_diff": d, "info_only": True}
        # Aux loss (Switch / HF load_balancing_loss_func, all layers' tokens concatenated).
        cat = torch.cat(raw_logits, dim=0)
        probs = torch.softmax(cat, dim=-1)
        _, sel = torch.topk(probs, k_top, dim=-1)
        mask = F.one_hot(sel, E).double()  # [T*L, k, E]
        aux = (mask.mean(dim=0) * probs.mean(dim=0)[None, :]).sum() * E
        hf_cat = torch.cat([out.router_logits[li].detach().double().reshape(-1, E) for li in range(cfg.num_hidden_layers)], dim=0)
        hp = torch.softmax(hf_cat, dim=-1)
        hm = F.one_hot(torch.topk(hp, k_top, dim=-1).indices, E).double()
        aux_hf = (hm.mean(dim=0) * hp.mean(dim=0)[None, :]).sum() * E
        CHECKS["mixtral.aux_loss_from_hf_router_logits"] = {"value": float(aux_hf), "hf_aux_loss": float(out.aux_loss), "info_only": True}
        check("mixtral.aux_loss_recomputed", abs(float(aux) - float(out.aux_loss)), 1e-5)
        total = lm_loss + cfg.router_aux_loss_coef * out.aux_loss.detach().double()
        check("mixtral.loss_equals_ce_plus_coef_aux", abs(float(total) - float(out.loss)), 1e-5)
        exp["aux_loss"] = out.aux_loss.detach().reshape(()).float()
        exp["lm_loss"] = lm_loss.float().reshape(())
        CHECKS["mixtral.min_topk_probability_margin"] = {"value": min_margin, "info_only": True}
        print(f"min margin between k-th and (k+1)-th router probability: {min_margin:.3e}", flush=True)
    else:
        check("llama.loss_equals_ce", abs(float(lm_loss) - float(out.loss)), 1e-5)

    # Gradients: Hub-layout names under grad.*, in-memory names under grad_state_dict.* where they differ.
    grads = {}
    unused = []
    for name, p in model.named_parameters():
        if p.grad is None:
            unused.append(name)
            grads[name] = torch.zeros_like(p)
        else:
            grads[name] = p.grad.detach().clone()
    if unused:
        print("parameters with no gradient (saved as zeros):", unused, flush=True)
    hub_grads = grads if kind == "llama" else to_hub_layout(grads, cfg)
    zero = sorted(k for k, v in hub_grads.items() if not bool(v.abs().max() > 0))
    if zero:
        print("parameters whose gradient is all zeros:", zero, flush=True)
    for k, v in hub_grads.items():
        exp["grad." + k] = v
    if kind == "mixtral":
        for k, v in grads.items():
            if k not in hub_grads:
                exp["grad_state_dict." + k] = v
    exp = {k: v.contiguous() for k, v in exp.items()}
    save_file(exp, os.path.join(out_dir, "expected.safetensors"), metadata={
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "seed": str(seed),
        "unused_parameters": json.dumps(unused),
        "zero_grad_parameters": json.dumps(zero),
    })
    with open(os.path.join(out_dir, "inputs.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "labels": labels.tolist()}, f)
        f.write("\n")
    print(f"{kind}: loss {float(out.loss):.6f}" + (f", aux_loss {float(out.aux_loss):.6f}" if kind == "mixtral" else ""), flush=True)
    print("expected tensors:", {k: list(v.shape) for k, v in exp.items() if not k.startswith("grad")}, flush=True)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory (e.g. core/test/fixtures)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print(f"python {sys.version.split()[0]} torch {torch.__version__} transformers {transformers.__version__} safetensors {safetensors.__version__}", flush=True)
    layout = {}
    for kind in ("llama", "mixtral"):
        layout[kind] = build(kind, os.path.join(args.out, kind))
    prov = {
        "command": "python3 scripts/hf-fixtures/make_fixtures.py --out core/test/fixtures",
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "safetensors": safetensors.__version__,
        "seeds": SEEDS,
        "layout": layout,
        "checks": CHECKS,
        "failures": FAILURES,
    }
    with open(os.path.join(args.out, "provenance.json"), "w") as f:
        json.dump(prov, f, indent=2)
        f.write("\n")
    if FAILURES:
        print("SELF-CHECKS FAILED:", FAILURES, flush=True)
        sys.exit(1)
    print("all self-checks passed", flush=True)


if __name__ == "__main__":
    main()
