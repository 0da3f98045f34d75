#!/usr/bin/env python3
"""Train the Hugging Face Transformers model of a ZeroMoE job on the exact batches ZeroMoE trained
on, from the same initial weights, and compare the losses step by step.

Inputs, both written by `bun run train`:
  --batches DIR   the `--dump-batches DIR` folder: batches.json (geometry and the resolved job: the
                  optimizer, schedule, clipping, precision, MoE settings) and one safetensors file
                  per step and rank with I32 `input_ids` and `labels` [micro_batches, batch, seq]
                  (docs/summary.md "Batch dumps and step-0 weights").
  --weights DIR   the `--save-init DIR` folder (config.json + model.safetensors in F32, the fp32
                  master ZeroMoE starts from), or any Hub directory or .safetensors file with
                  Hugging Face names (a file alone takes the model config from batches.json).

What is reproduced (each a rule of ZeroMoE's engine, core/src/engine/engine.ts trainBatch):
  - a step runs every rank's micro-batches (world_size x gradient_accumulation_steps of them, one
    process here); each micro-batch's loss is the mean cross-entropy over its own valid shifted
    targets (Transformers' causal-LM loss) plus router_aux_loss_coef x the load-balancing loss when
    the model's output_router_logits is true (Mixtral/Qwen3-MoE semantics); the gradient is the
    mean of the micro-batch gradients; the logged step loss is the mean of the micro-batch losses;
  - global-norm gradient clipping with coefficient min(1, max_norm / (norm + 1e-6));
  - AdamW (decoupled weight decay on every parameter, torch.optim.AdamW's update);
  - DeepSpeed's schedules (WarmupLR, WarmupDecayLR, WarmupCosineLR, or constant) with DeepSpeed's
    step convention: optimizer step s uses the schedule at last_batch_iteration s - 2 (step 1 at -1).
Router options Transformers has no counterpart for (Switch/GShard aux losses, z-loss, noise,
logit clamping, capacity drops, jitter) and fp16 loss scaling are refused, naming the key.

Engines:
  --engine eager      plain PyTorch; --dtype fp32, or bf16 (torch.autocast over fp32 parameters).
  --engine deepspeed  DeepSpeed ZeRO --stage N, bf16 (or fp32), world size 1: MASTER_ADDR/PORT,
                      RANK, LOCAL_RANK and WORLD_SIZE are set here for a single process; AdamW with
                      "torch_adam": true (no FusedAdam build); the job's schedule in the DeepSpeed
                      config as it is.

Output: one JSON line per step on stdout (or --log FILE): step, loss, lr, grad_norm, ms (CUDA-
synchronised wall time of the step), max_memory_allocated (bytes, since the start), and for MoE
models expert_counts[layer][expert] (top-k routing choices of the step, all micro-batches); then a
"summary" line (mean ms over the steps after --warmup, peak memory, losses). --out FILE writes the
summary with every step's loss and counts as JSON. --compare ZEROMOE_SUMMARY.json prints, per step,
the relative loss difference |ref - zeromoe| / |ref| and the routing difference
sum|a - b| / (2 sum a) per layer, then their maxima; with --tolerance T the exit status is 1 when
the largest relative loss difference exceeds T. `--reference REF.json --compare S.json` compares a
saved reference without training.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

BATCHES_FORMAT = "zeromoe-batches"


class ReferenceError(Exception):
    """A problem with the inputs: printed as one line, exit status 2."""


# ---------------------------------------------------------------- the job and the batches (no torch)

def read_manifest(batches_dir: str) -> dict:
    """batches.json of a dump folder, checked. Raises ReferenceError naming the file and field."""
    path = Path(batches_dir) / "batches.json"
    if not path.is_file():
        raise ReferenceError(f"{path}: not found (give the folder bun run train --dump-batches wrote)")
    m = json.loads(path.read_text())
    if m.get("format") != BATCHES_FORMAT or m.get("version") != 1:
        raise ReferenceError(f"{path}: format {m.get('format')!r} version {m.get('version')!r}; expected {BATCHES_FORMAT!r} version 1")
    for k in ("world_size", "micro_batches", "batch", "seq_len", "vocab_size", "start_step", "steps", "job"):
        if k not in m:
            raise ReferenceError(f"{path}: field {k} missing")
    return m


def batch_file(batches_dir: str, step: int, rank: int) -> Path:
    """The dump file of `step` and `rank` (core/src/train/batch-dump.ts batchDumpFile)."""
    return Path(batches_dir) / f"step-{step:06d}.rank-{rank:05d}.safetensors"


def check_job(job: dict, engine: str) -> list[str]:
    """Settings of the resolved ZeroMoE job that this reference cannot reproduce (empty: none)."""
    bad = []
    if job.get("fp16", {}).get("enabled"):
        bad.append("fp16.enabled: fp16 loss scaling is not reproduced; use bf16 or fp32")
    opt = job["optimizer"]
    if opt["type"] == "Lamb" or not opt["params"].get("adam_w_mode", True):
        bad.append(f"optimizer: {opt['type']} (adam_w_mode {opt['params'].get('adam_w_mode')}) is not reproduced; use AdamW")
    sched = job.get("scheduler")
    if sched is not None and sched["type"] not in ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR") and engine == "eager":
        bad.append(f"scheduler.type: {sched['type']} is reproduced with --engine deepspeed only")
    model = job["model"]
    if model.get("router_jitter_noise", 0):
        bad.append("model.router_jitter_noise: random jitter cannot be reproduced")
    moe = job.get("moe")
    if moe is not None:
        if moe["aux_loss"] != "mixtral" and model.get("output_router_logits"):
            bad.append(f"moe.aux_loss: {moe['aux_loss']!r} has no Transformers counterpart (only Hugging Face's 'mixtral' load-balancing loss)")
        if moe.get("z_loss_coef", 0):
            bad.append("moe.z_loss_coef: the router z-loss has no Transformers counterpart")
        if moe.get("noisy_gate_policy") is not None:
            bad.append("moe.noisy_gate_policy: router noise cannot be reproduced")
        if moe.get("router_logits_clamp") is not None:
            bad.append("moe.router_logits_clamp: no Transformers counterpart")
        if moe.get("drop_tokens"):
            bad.append("moe.drop_tokens: capacity drops have no Transformers counterpart")
    return bad


def lr_at(job: dict, step: int) -> float:
    """The learning rate of optimizer step `step` (1-based) under the job's schedule, with
    DeepSpeed's convention (core/src/optim/schedulers.ts): the schedule starts at
    last_batch_iteration -1 and advances after each step, so step s reads it at s - 2."""
    base = job["optimizer"]["params"]["lr"]
    sched = job.get("scheduler")
    if sched is None:
        return base
    t = step - 2
    p = sched["params"]
    typ = sched["type"]

    def gamma(i: int, warmup: int) -> float:
        return math.log(i + 1) / math.log(warmup) if p["warmup_type"] == "log" else i / warmup

    if typ in ("WarmupLR", "WarmupDecayLR"):
        if t < 0:
            return p["warmup_min_lr"]
        warmup = max(2, p["warmup_num_steps"])
        if t < warmup:
            g = gamma(t, warmup)
        elif typ == "WarmupLR":
            g = 1.0
        else:
            g = max(0.0, (p["total_num_steps"] - t) / max(1, p["total_num_steps"] - warmup))
        return p["warmup_min_lr"] + (p["warmup_max_lr"] - p["warmup_min_lr"]) * g
    if typ == "WarmupCosineLR":
        if t < 0:
            return 0.0
        warmup = max(2, p["warmup_num_steps"])
        if t < warmup:
            ratio = p["warmup_min_ratio"] + gamma(t, warmup) * (1 - p["warmup_min_ratio"])
        else:
            real_last = t - warmup + 1
            real_total = p["total_num_steps"] - warmup
            if real_total <= 0:
                ratio = p["cos_min_ratio"]
            else:
                cosine = (1 + math.cos(math.pi * real_last / real_total)) / 2
                ratio = max(0.0, p["cos_min_ratio"] + (1 - p["cos_min_ratio"]) * cosine)
        return base * ratio
    raise ReferenceError(f"scheduler.type {typ}: not reproduced by --engine eager")


def deepspeed_config(job: dict, stage: int, bf16: bool, micro: int, accum: int) -> dict:
    """The DeepSpeed config of the job for one process: its optimizer (torch_adam), schedule,
    clipping and ZeRO buckets, at `stage`, with `accum` micro-batches per step."""
    o = job["optimizer"]["params"]
    cfg = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "optimizer": {"type": "AdamW", "params": {"lr": o["lr"], "betas": list(o["betas"]), "eps": o["eps"], "weight_decay": o["weight_decay"], "torch_adam": True, "adam_w_mode": True}},
        "gradient_clipping": job.get("gradient_clipping", 0.0),
        "bf16": {"enabled": bool(bf16)},
        "zero_optimization": {"stage": stage},
        "steps_per_print": 2 ** 31 - 1,
        "wall_clock_breakdown": False,
    }
    z = job.get("zero_optimization", {})
    for k in ("reduce_bucket_size", "allgather_bucket_size", "overlap_comm", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance"):
        if k in z and z[k] is not None:
            cfg["zero_optimization"][k] = z[k]
    sched = job.get("scheduler")
    if sched is not None:
        keep = {
            "WarmupLR": ("warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type"),
            "WarmupDecayLR": ("warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "total_num_steps"),
            "WarmupCosineLR": ("total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type"),
        }.get(sched["type"])
        params = {k: v for k, v in sched["params"].items() if keep is None or k in keep}
        cfg["scheduler"] = {"type": sched["type"], "params": params}
    return cfg


def routing_difference(a: list[list[int]], b: list[list[int]]) -> list[float]:
    """Per layer, the share of routing choices that differ between two count tables:
    sum_e |a_e - b_e| / (2 sum_e a_e) (0: the same counts; 1: disjoint experts)."""
    out = []
    for ra, rb in zip(a, b):
        tot = sum(ra)
        out.append(sum(abs(x - y) for x, y in zip(ra, rb)) / (2 * tot) if tot > 0 else 0.0)
    return out


def compare(ref: dict, summary: dict, emit) -> dict:
    """Per-step relative loss differences of `ref` (this script's summary) against a ZeroMoE
    `--summary` file, and the routing differences when both have per-step expert counts."""
    zl = summary.get("losses")
    if not isinstance(zl, list):
        raise ReferenceError("--compare: the ZeroMoE summary has no losses list")
    rl = ref["losses"]
    start = summary.get("start_step", 0)
    if start != ref.get("start_step", 0):
        raise ReferenceError(f"--compare: the ZeroMoE run starts after step {start}, the reference after step {ref.get('start_step', 0)}")
    n = min(len(zl), len(rl))
    if n == 0:
        raise ReferenceError("--compare: no step in common")
    zc = (summary.get("moe") or {}).get("step_expert_counts") or []
    rc = ref.get("step_expert_counts") or []
    rels = []
    routing_max = None
    for i in range(n):
        rel = abs(rl[i] - zl[i]) / abs(rl[i]) if rl[i] != 0 else abs(zl[i])
        rels.append(rel)
        line = {"compare_step": start + i + 1, "zeromoe": zl[i], "reference": rl[i], "rel_diff": rel}
        if i < len(zc) and i < len(rc):
            d = routing_difference(rc[i], zc[i])
            line["routing_diff"] = [round(x, 6) for x in d]
            routing_max = max([routing_max or 0.0] + d)
        emit(line)
    res = {"compare": {"steps": n, "max_rel_diff": max(rels), "mean_rel_diff": sum(rels) / n, "worst_step": start + 1 + rels.index(max(rels)), "max_routing_diff": routing_max}}
    emit(res)
    return res["compare"]


# ---------------------------------------------------------------- training (torch from here on)

def load_batches(batches_dir: str, m: dict, step: int):
    """All micro-batches of `step` over every rank, rank-major: (input_ids, labels) pairs of int64
    [batch, seq] tensors."""
    import torch
    from safetensors.numpy import load_file
    out = []
    for r in range(m["world_size"]):
        f = batch_file(batches_dir, step, r)
        if not f.is_file():
            raise ReferenceError(f"{f}: not found (the dump has no step {step} for rank {r})")
        t = load_file(str(f))
        ids, labels = t["input_ids"], t["labels"]
        want = (m["micro_batches"], m["batch"], m["seq_len"])
        if tuple(ids.shape) != want or tuple(labels.shape) != want:
            raise ReferenceError(f"{f}: input_ids {tuple(ids.shape)}, labels {tuple(labels.shape)}; expected {want}")
        for i in range(want[0]):
            out.append((torch.from_numpy(ids[i].astype("int64")), torch.from_numpy(labels[i].astype("int64"))))
    return out


def build_model(weights: str, job: dict, attn: str):
    """The Transformers model with the weights at `weights` in fp32, its router settings set from
    the job (aux-loss coefficient and output_router_logits as ZeroMoE applies them)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    w = Path(weights)
    if w.is_dir() and (w / "config.json").is_file():
        config = AutoConfig.from_pretrained(str(w))
    else:
        keys = {k: v for k, v in job["model"].items() if k not in ("from_pretrained",) and v is not None}
        mt = keys.pop("model_type")
        config = AutoConfig.for_model(mt, **keys)
    moe = job.get("moe")
    out_router = bool(job["model"].get("output_router_logits", False))
    if moe is not None:
        # ZeroMoE adds aux_loss_coef x aux only with output_router_logits (HF); the router logits
        # are always asked for here (expert counts), so the coefficient is 0 when the job has none
        config.router_aux_loss_coef = moe["aux_loss_coef"] if out_router else 0.0
        config.output_router_logits = True
    config._attn_implementation = attn
    if w.is_dir() and (w / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(str(w), config=config, dtype=torch.float32, attn_implementation=attn)
    else:
        from safetensors.torch import load_file
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn)
        missing, unexpected = model.load_state_dict(load_file(str(w)), strict=False)
        missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
        if missing or unexpected:
            raise ReferenceError(f"{w}: missing tensors {missing[:5]}, unexpected {unexpected[:5]}")
    return model


def expert_counts(router_logits, top_k: int, num_experts: int) -> list[list[int]]:
    """Top-k routing choices per layer from Transformers' router logits (one [tokens, E] tensor
    per MoE layer): softmax then top-k, as Mixtral and Qwen3-MoE route."""
    import torch
    out = []
    for lg in router_logits:
        if lg is None:
            continue
        idx = torch.topk(torch.softmax(lg.float(), dim=-1), top_k, dim=-1).indices.reshape(-1)
        out.append(torch.bincount(idx, minlength=num_experts).tolist())
    return out


def train(a, m: dict, emit) -> dict:
    import torch
    job = m["job"]
    bad = check_job(job, a.engine)
    if m["start_step"] != 0:
        bad.append(f"the dump starts after step {m['start_step']} (a resumed run): the reference starts from step-0 weights and fresh optimizer moments; dump a run from step 1")
    if bad:
        raise ReferenceError("the job has settings this reference does not reproduce:\n  - " + "\n  - ".join(bad))
    device = torch.device(a.device)
    bf16 = a.dtype == "bf16"
    torch.manual_seed(0)
    model = build_model(a.weights, job, a.attn)
    ckpt = {"job": bool(job["activation_checkpointing"]["enabled"]), "on": True, "off": False}[a.checkpointing]
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    moe = job.get("moe") is not None
    top_k = job["model"].get("num_experts_per_tok", 0)
    num_experts = job["model"].get("num_local_experts", 0)
    micro = m["batch"]
    accum = m["world_size"] * m["micro_batches"]
    clip = job.get("gradient_clipping", 0.0)
    first = m["start_step"] + 1
    last = m["steps"] if a.steps is None else min(m["steps"], m["start_step"] + a.steps)
    o = job["optimizer"]["params"]
    if a.engine == "deepspeed":
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(a.master_port))
        os.environ["RANK"] = "0"
        os.environ["LOCAL_RANK"] = "0"
        os.environ["WORLD_SIZE"] = "1"
        import deepspeed
        if device.type == "cuda":
            torch.cuda.set_device(device.index if device.index is not None else 0)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=deepspeed_config(job, a.stage, bf16, micro, accum))
        fwd = engine
    else:
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"], foreach=False)
        fwd = model
    model.train()
    cuda = device.type == "cuda"
    losses, counts_all, times = [], [], []
    for step in range(first, last + 1):
        micros = load_batches(a.batches, m, step)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if a.engine == "eager":
            lr = lr_at(job, step)
            for g in opt.param_groups:
                g["lr"] = lr
        else:
            lr = engine.get_lr()[0]
        step_losses = []
        step_counts = None
        for ids, labels in micros:
            ids = ids.to(device)
            labels = labels.to(device)
            ctx = torch.autocast(device_type=device.type, dtype=torch.bfloat16) if (bf16 and a.engine == "eager") else _nullcontext()
            with ctx:
                out = fwd(input_ids=ids, labels=labels, output_router_logits=True) if moe else fwd(input_ids=ids, labels=labels)
            loss = out.loss
            if a.engine == "deepspeed":
                engine.backward(loss)
                engine.step()
            else:
                (loss / accum).backward()
            step_losses.append(loss.detach().float())
            if moe:
                c = expert_counts(out.router_logits, top_k, num_experts)
                step_counts = c if step_counts is None else [[x + y for x, y in zip(r1, r2)] for r1, r2 in zip(step_counts, c)]
        grad_norm = None
        if a.engine == "eager":
            if clip > 0:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), clip))
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            gn = engine.get_global_grad_norm()
            grad_norm = None if gn is None else float(gn)
        if cuda:
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1000
        loss_v = float(torch.stack(step_losses).mean())
        losses.append(loss_v)
        times.append(ms)
        line = {"step": step, "loss": loss_v, "lr": lr, "grad_norm": grad_norm, "ms": round(ms, 2), "max_memory_allocated": torch.cuda.max_memory_allocated(device) if cuda else None}
        if moe:
            line["expert_counts"] = step_counts
            counts_all.append(step_counts)
        emit(line)
    timed = times[a.warmup:] if len(times) > a.warmup else times
    summary = {
        "engine": a.engine if a.engine == "eager" else f"deepspeed ZeRO-{a.stage}",
        "dtype": a.dtype,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "steps": len(losses),
        "start_step": m["start_step"],
        "tokens_per_step": accum * micro * m["seq_len"],
        "ms_per_step": sum(timed) / len(timed) if timed else None,
        "warmup_steps_excluded": min(a.warmup, max(0, len(times) - 1)) if len(times) > a.warmup else 0,
        "max_memory_allocated": torch.cuda.max_memory_allocated(device) if cuda else None,
        "activation_checkpointing": ckpt,
        "losses": losses,
        "step_expert_counts": counts_all if moe else None,
    }
    return summary


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", help="the --dump-batches folder")
    p.add_argument("--weights", help="the --save-init folder, a Hub directory or a .safetensors file")
    p.add_argument("--engine", choices=("eager", "deepspeed"), default="eager")
    p.add_argument("--stage", type=int, choices=(0, 1, 2, 3), default=3, help="ZeRO stage of --engine deepspeed")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default=None, help="default: bf16 when the job is bf16, else fp32")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--attn", default="sdpa", help="Transformers attention implementation (sdpa, eager)")
    p.add_argument("--checkpointing", choices=("job", "on", "off"), default="job", help="activation checkpointing (default: the job's)")
    p.add_argument("--steps", type=int, default=None, help="train at most this many steps of the dump")
    p.add_argument("--warmup", type=int, default=2, help="steps left out of ms_per_step")
    p.add_argument("--master-port", type=int, default=29511)
    p.add_argument("--log", help="write the per-step JSON lines here instead of stdout")
    p.add_argument("--out", help="write the summary (every step's loss and expert counts) as JSON here")
    p.add_argument("--reference", help="a summary written by --out: compare it without training")
    p.add_argument("--compare", help="a ZeroMoE --summary file to compare the losses with")
    p.add_argument("--tolerance", type=float, default=None, help="exit 1 when the largest relative loss difference exceeds this")
    a = p.parse_args(argv)
    if a.reference is None and (a.batches is None or a.weights is None):
        p.error("--batches and --weights are needed to train (or --reference with --compare)")
    if a.reference is not None and a.compare is None:
        p.error("--reference needs --compare")
    return a


def main(argv=None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    log = open(a.log, "w") if a.log else None

    def emit_step(obj):
        print(json.dumps(obj), file=log or sys.stdout, flush=True)

    def emit(obj):
        print(json.dumps(obj), flush=True)

    try:
        if a.reference is not None:
            ref = json.loads(Path(a.reference).read_text())
        else:
            m = read_manifest(a.batches)
            if a.dtype is None:
                a.dtype = "bf16" if m["job"]["bf16"]["enabled"] else "fp32"
            if a.device is None:
                import torch
                a.device = "cuda" if torch.cuda.is_available() else "cpu"
            ref = train(a, m, emit_step)
            emit({"summary": {k: v for k, v in ref.items() if k not in ("losses", "step_expert_counts")}, "losses": [round(x, 6) for x in ref["losses"]]})
            if a.out:
                Path(a.out).write_text(json.dumps(ref) + "\n")
        if a.compare is not None:
            res = compare(ref, json.loads(Path(a.compare).read_text()), emit_step if a.log else emit)
            if a.log:
                emit({"compare": res})
            if a.tolerance is not None and res["max_rel_diff"] > a.tolerance:
                print(f"error: the largest relative loss difference {res['max_rel_diff']:.3g} (step {res['worst_step']}) exceeds --tolerance {a.tolerance}", file=sys.stderr)
                return 1
        return 0
    except ReferenceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if log:
            log.close()


if __name__ == "__main__":
    sys.exit(main())
