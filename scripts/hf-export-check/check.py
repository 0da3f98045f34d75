#!/usr/bin/env python3
"""Check that ZeroMoE's Hub-directory exports load in Hugging Face Transformers with our logits.

Usage: python3 scripts/hf-export-check/check.py <dir made by make.ts (out/hf-export-check)>

For each <dir>/<family>/ (made by scripts/hf-export-check/make.ts): load <family>/hub with
transformers.AutoModelForCausalLM.from_pretrained(hub, torch_dtype=torch.float32,
attn_implementation="eager", output_loading_info=True) on the CPU, run the input ids of
<family>/ours.json and compare Transformers' logits with ours (computed by ZeroMoE from the same
exported files). Then the same on CUDA (TF32 off) when a GPU is present.

Reported per (family, device): max |ours - theirs| (max_abs_diff), the logit scale max |ours|, and
rel = max_abs_diff / max(1, scale). Pass: rel <= 1e-4 AND no missing / unexpected / mismatched keys
in the loading info. A family that fails to load prints Transformers' exception verbatim.
Exit status 0 when every family passes, else 1.
"""

import json
import os
import sys
import traceback

import torch
import transformers
from transformers import AutoModelForCausalLM

REL_TOL = 1e-4


def check_family(root: str, family: str) -> list:
    ours = json.load(open(os.path.join(root, family, "ours.json")))
    ids = torch.tensor(ours["input_ids"], dtype=torch.long)
    want = torch.tensor(ours["logits"], dtype=torch.float32).reshape(ours["shape"])
    scale = want.abs().max().item()
    hub = os.path.join(root, family, "hub")
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            hub, torch_dtype=torch.float32, attn_implementation="eager", output_loading_info=True
        )
    except Exception as e:  # report exactly what Transformers said
        return [{"family": family, "device": "-", "ok": False, "load_error": f"{type(e).__name__}: {e}",
                 "traceback_tail": traceback.format_exc().splitlines()[-6:]}]
    info = {k: sorted(map(str, v)) for k, v in info.items() if v}
    model.eval()
    rows = []
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        if dev == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        row = {"family": family, "device": dev, "class": type(model).__name__, "logit_scale": scale}
        try:
            m = model.to(dev)
            with torch.no_grad():
                got = m(input_ids=ids.to(dev)).logits.float().cpu()
            if tuple(got.shape) != tuple(want.shape):
                row.update(ok=False, error=f"logits shape {tuple(got.shape)} != ours {tuple(want.shape)}")
            else:
                diff = (got - want).abs().max().item()
                rel = diff / max(1.0, scale)
                argmax_agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
                row.update(max_abs_diff=diff, rel=rel, argmax_agreement=argmax_agree,
                           ok=(rel <= REL_TOL and not info))
        except Exception as e:
            row.update(ok=False, forward_error=f"{type(e).__name__}: {e}",
                       traceback_tail=traceback.format_exc().splitlines()[-6:])
        if info:
            row["loading_info"] = info
        rows.append(row)
    return rows


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = sys.argv[1]
    families = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "ours.json")))
    if not families:
        print(f"{root}: no <family>/ours.json found (run scripts/hf-export-check/make.ts first)", file=sys.stderr)
        return 2
    env = {"torch": torch.__version__, "transformers": transformers.__version__,
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "rel_tol": REL_TOL}
    print(json.dumps(env))
    ok = True
    for fam in families:
        for row in check_family(root, fam):
            ok = ok and row["ok"]
            print(json.dumps(row))
    print(json.dumps({"all_ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
