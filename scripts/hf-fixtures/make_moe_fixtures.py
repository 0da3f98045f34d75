#!/usr/bin/env python3
"""Build tiny Hugging Face reference fixtures for ZeroMoE's MoE families (issue 14).

Families: qwen3_moe, qwen2_moe, deepseek_v3, deepseek_v2 (Transformers 5, fp32, CPU, seeded).
For each family this script (same pattern as make_fixtures.py):
  1. builds a tiny random model through AutoModelForCausalLM.from_config (eager attention) with the
     family's HF config keys (see FAMILIES), and re-initialises every parameter N(0, 1/fan_in)
     (router x2), norms 1 + N(0, 0.2^2), biases and DeepSeek-V3's e_score_correction_bias N(0, 0.1^2);
     takes the first seed from SEED on where every expert gets >= 1 pick and the k-th/(k+1)-th
     selection scores differ by >= 1e-3 everywhere (else the seed with the largest margin, recorded);
  2. runs forward with labels on input ids [2, 7] (one label -100), then backward;
  3. writes OUT/<family>/:
       config.json             as save_pretrained wrote it
       model.safetensors       save_pretrained's weights (the Hub layout, one file)
       state_dict.safetensors  model.state_dict() where it differs from the Hub layout (fused experts)
       sharded/                save_pretrained with a small max_shard_size: config.json, shards, index
       inputs.json             input_ids, labels
       expected.safetensors    logits, loss, lm_loss, aux_loss (where the family has one), per sparse
                               layer router_logits.{l} (= gate(x) recomputed in float64 from the captured
                               gate input), hf_router_logits.{l} (outputs.router_logits where returned),
                               moe_in.{l} / moe_out.{l}, layer_out.{l}, and grad.{hub name} for every
                               parameter (gradients mapped to the Hub layout by save_pretrained itself:
                               the gradients are copied into a clone's parameters and saved)
  and OUT/provenance-moe.json (versions, seeds, each family's full default config, self-checks).
Self-checks: the Hub file reloaded with from_pretrained gives identical logits; the sharded directory
too; loss = float64 CE (+ coef * aux where the family adds one).

Usage: python3 scripts/hf-fixtures/make_moe_fixtures.py --out core/test/fixtures
Needs torch, transformers >= 5 and safetensors (the H200 machine; it computes on the CPU).
"""

import argparse
import copy
import json
import math
import os
import shutil
import sys
import tempfile
import traceback

import torch
import torch.nn.functional as F

import safetensors
import transformers
from safetensors.torch import load_file, save_file

SEED = 20261201
BATCH, SEQ = 2, 7
COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=4, max_position_embeddings=64,
              tie_word_embeddings=False, attention_dropout=0.0, use_cache=False, rms_norm_eps=1e-6)

FAMILIES = {
    "qwen3_moe": dict(num_hidden_layers=3, num_key_value_heads=2, head_dim=12, num_experts=6, num_experts_per_tok=2,
                      moe_intermediate_size=24, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1],
                      output_router_logits=True, router_aux_loss_coef=0.02),
    "qwen2_moe": dict(num_hidden_layers=2, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=24, shared_expert_intermediate_size=40, norm_topk_prob=False,
                      decoder_sparse_step=1, mlp_only_layers=[], output_router_logits=True, router_aux_loss_coef=0.02),
    "deepseek_v3": dict(num_hidden_layers=3, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
                        moe_intermediate_size=16, n_shared_experts=1, first_k_dense_replace=1, n_group=4, topk_group=2,
                        routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=16, kv_lora_rank=12,
                        qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=6),
    "deepseek_v2": dict(num_hidden_layers=3, num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=2,
                        moe_intermediate_size=16, n_shared_experts=1, first_k_dense_replace=1, n_group=4, topk_group=2,
                        topk_method="group_limited_greedy", routed_scaling_factor=1.5, norm_topk_prob=False,
                        q_lora_rank=None, kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=6),
}

CHECKS, SEEDS, DEFAULTS, FAILURES, INFO = {}, {}, {}, [], {}


def check(name, value, tol):
    ok = bool(value <= tol)
    CHECKS[name] = {"max_abs_diff": float(value), "tol": tol, "ok": ok}
    print(f"check {name}: max|diff| = {value:.3e} (tol {tol:g}) {'OK' if ok else 'FAIL'}", flush=True)
    if not ok:
        FAILURES.append(name)


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or "e_score_correction_bias" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                scale = 1.0 / math.sqrt(p.shape[-1])
                if name.endswith("mlp.gate.weight"):
                    scale *= 2.0
                p.copy_(torch.randn(p.shape, generator=gen) * scale)
        for name, b in model.named_buffers():
            if "e_score_correction_bias" in name:
                b.copy_(0.1 * torch.randn(b.shape, generator=gen))


def sparse_blocks(model):
    out = {}
    for li, layer in enumerate(model.model.layers):
        m = getattr(layer, "mlp", None)
        if m is not None and hasattr(m, "gate") and hasattr(m, "experts"):
            out[li] = m
    return out


def first(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def num_experts(cfg):
    return getattr(cfg, "num_experts", None) or getattr(cfg, "n_routed_experts")


def selection_scores(family, rl, bias):
    if family == "deepseek_v3":
        return torch.sigmoid(rl) + (bias.double() if bias is not None else 0.0)
    return torch.softmax(rl, dim=-1)


def run_forward(model, ids, labels, family, want_router):
    gate_in = {}
    acts = {}
    hooks = []
    blocks = sparse_blocks(model)
    for li, blk in blocks.items():
        def gate_hook(m, args, kwargs, o, li=li):
            x = args[0] if args else next(iter(kwargs.values()))
            gate_in[li] = x.detach().clone()

        hooks.append(blk.gate.register_forward_hook(gate_hook, with_kwargs=True))

        def blk_hook(m, args, kwargs, o, li=li):
            x = args[0] if args else kwargs["hidden_states"]
            acts[f"moe_in.{li}"] = x.detach().clone()
            acts[f"moe_out.{li}"] = first(o).detach().clone()

        hooks.append(blk.register_forward_hook(blk_hook, with_kwargs=True))
    for li, layer in enumerate(model.model.layers):
        hooks.append(layer.register_forward_hook(lambda m, a, o, li=li: acts.__setitem__(f"layer_out.{li}", first(o).detach().clone())))
    kwargs = dict(input_ids=ids, use_cache=False)
    if labels is not None:
        kwargs["labels"] = labels
    if want_router:
        kwargs["output_router_logits"] = True
    out = model(**kwargs)
    for h in hooks:
        h.remove()
    rls = {}
    for li, blk in blocks.items():
        x = gate_in[li].double().reshape(-1, model.config.hidden_size)
        rls[li] = x @ blk.gate.weight.detach().double().t()
    return out, acts, rls, blocks


def build(family, out_dir):
    print(f"=== {family} ===", flush=True)
    cfg_cls = transformers.AutoConfig.for_model(family).__class__
    DEFAULTS[family] = cfg_cls().to_dict()
    cfg = cfg_cls(**COMMON, **FAMILIES[family])
    cfg._attn_implementation = "eager"
    k_top = cfg.num_experts_per_tok
    want_router = hasattr(cfg, "output_router_logits") and bool(getattr(cfg, "output_router_logits", False))
    best = None
    for seed in range(SEED, SEED + 100):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float()
        randomize(model, gen)
        model.eval()
        ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen)
        with torch.no_grad():
            _, _, rls, blocks = run_forward(model, ids, None, family, False)
        E = num_experts(cfg)
        margin, mincount = float("inf"), 1 << 30
        for li, rl in rls.items():
            bias = getattr(blocks[li].gate, "e_score_correction_bias", None)
            s = selection_scores(family, rl, bias)
            counts = torch.bincount(torch.topk(s, k_top, dim=-1).indices.reshape(-1), minlength=E)
            sp = s.sort(dim=-1, descending=True).values
            margin = min(margin, float((sp[:, k_top - 1] - sp[:, k_top]).min()))
            mincount = min(mincount, int(counts.min()))
        if best is None or margin > best[1]:
            best = (seed, margin)
        if margin >= 1e-3 and mincount >= 1:
            break
    else:
        seed = best[0]
        print(f"{family}: no seed met the routing criteria; using the largest-margin seed {seed}", flush=True)
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float()
        randomize(model, gen)
        model.eval()
        ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), generator=gen)
    SEEDS[family] = seed
    labels = ids.clone()
    labels[1, 3] = -100
    out, acts, rls, blocks = run_forward(model, ids, labels, family, want_router)
    out.loss.backward()

    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp()
    model.save_pretrained(tmp)
    shutil.copy(os.path.join(tmp, "config.json"), os.path.join(out_dir, "config.json"))
    shutil.copy(os.path.join(tmp, "model.safetensors"), os.path.join(out_dir, "model.safetensors"))
    saved = load_file(os.path.join(tmp, "model.safetensors"))
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    info = {"hub_keys": sorted(saved.keys()), "state_dict_keys": sorted(sd.keys()),
            "param_names": [n for n, _ in model.named_parameters()], "class": type(model).__name__,
            "block_class": {str(li): type(b).__name__ for li, b in blocks.items()},
            "gate_class": {str(li): type(b.gate).__name__ for li, b in blocks.items()}}
    if set(sd.keys()) != set(saved.keys()):
        save_file(sd, os.path.join(out_dir, "state_dict.safetensors"), metadata={"format": "pt"})
    shard_dir = os.path.join(out_dir, "sharded")
    model.save_pretrained(shard_dir, max_shard_size="40KB")
    info["sharded_files"] = sorted(os.listdir(shard_dir))
    INFO[family] = info

    m2 = transformers.AutoModelForCausalLM.from_pretrained(out_dir, attn_implementation="eager").float().eval()
    with torch.no_grad():
        o2 = m2(input_ids=ids, use_cache=False)
    check(f"{family}.hub_file_reload_logits", float((o2.logits - out.logits.detach()).abs().max()), 0.0)
    m3 = transformers.AutoModelForCausalLM.from_pretrained(shard_dir, attn_implementation="eager").float().eval()
    with torch.no_grad():
        o3 = m3(input_ids=ids, use_cache=False)
    check(f"{family}.sharded_dir_reload_logits", float((o3.logits - out.logits.detach()).abs().max()), 0.0)

    V = cfg.vocab_size
    lg = out.logits.detach().double()[:, :-1, :].reshape(-1, V)
    lm_loss = F.cross_entropy(lg, labels[:, 1:].reshape(-1), ignore_index=-100)
    exp = {"logits": out.logits.detach(), "loss": out.loss.detach().reshape(()), "lm_loss": lm_loss.float().reshape(())}
    exp.update(acts)
    for li, rl in rls.items():
        exp[f"router_logits.{li}"] = rl.float()
    aux = getattr(out, "aux_loss", None)
    if aux is not None:
        exp["aux_loss"] = aux.detach().float().reshape(())
        total = lm_loss + cfg.router_aux_loss_coef * aux.detach().double()
        check(f"{family}.loss_equals_ce_plus_coef_aux", abs(float(total) - float(out.loss)), 1e-5)
        hf_rl = [r for r in (out.router_logits or ()) if r is not None]
        for li, r in zip(sorted(rls.keys()), hf_rl):
            exp[f"hf_router_logits.{li}"] = r.detach().float().reshape(-1, num_experts(cfg))
    else:
        check(f"{family}.loss_equals_ce", abs(float(lm_loss) - float(out.loss)), 1e-5)
    for li, b in blocks.items():
        bias = getattr(b.gate, "e_score_correction_bias", None)
        if bias is not None:
            exp[f"e_score_correction_bias.{li}"] = bias.detach().float().clone()

    # gradients in the Hub layout: copy them into a clone's parameters, let save_pretrained convert
    clone = copy.deepcopy(model)
    unused = []
    with torch.no_grad():
        for (n, p), (_, q) in zip(model.named_parameters(), clone.named_parameters()):
            if p.grad is None:
                unused.append(n)
                q.zero_()
            else:
                q.copy_(p.grad)
    gdir = tempfile.mkdtemp()
    clone.save_pretrained(gdir)
    gsaved = load_file(os.path.join(gdir, "model.safetensors"))
    buffers = {n for n, _ in model.named_buffers()}
    for k, v in gsaved.items():
        if k in buffers or "e_score_correction_bias" in k:
            continue
        exp["grad." + k] = v.float()
    if sd.keys() != saved.keys():
        for n, p in model.named_parameters():
            exp["grad_state_dict." + n] = (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()
    exp = {k: v.contiguous() for k, v in exp.items()}
    save_file(exp, os.path.join(out_dir, "expected.safetensors"), metadata={
        "torch": torch.__version__, "transformers": transformers.__version__, "seed": str(seed),
        "unused_parameters": json.dumps(unused)})
    with open(os.path.join(out_dir, "inputs.json"), "w") as f:
        json.dump({"input_ids": ids.tolist(), "labels": labels.tolist()}, f)
        f.write("\n")
    print(f"{family}: loss {float(out.loss):.6f}" + (f", aux {float(aux):.6f}" if aux is not None else "") + f"; unused {unused}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--families", default=",".join(FAMILIES))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print(f"python {sys.version.split()[0]} torch {torch.__version__} transformers {transformers.__version__}", flush=True)
    errors = {}
    for fam in args.families.split(","):
        try:
            build(fam, os.path.join(args.out, fam))
        except Exception as e:  # keep going: record which family failed and why
            traceback.print_exc()
            errors[fam] = f"{type(e).__name__}: {e}"
            FAILURES.append(fam)
    prov = {"command": "python3 scripts/hf-fixtures/make_moe_fixtures.py --out core/test/fixtures",
            "python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "seeds": SEEDS, "families": FAMILIES, "checks": CHECKS,
            "failures": FAILURES, "errors": errors, "layout": INFO, "default_configs": DEFAULTS}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "provenance-moe.json"), "w") as f:
        json.dump(prov, f, indent=2, default=str)
        f.write("\n")
    print("FAILURES:" if FAILURES else "all self-checks passed", FAILURES, flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
