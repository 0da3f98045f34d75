#!/usr/bin/env python3
"""Check that ZeroMoE's exported models load in Hugging Face Transformers with the same logits.

Usage: python3 core/test/checkpoint/hf-export/check_hf.py <dir made by make-export.ts> [--out result.json]

For each of <dir>/save16 (engine.save16bitModel) and <dir>/fp32 (bun run zero-to-fp32): load with
AutoModelForCausalLM.from_pretrained (fp32, eager attention, CPU and, when present, CUDA), run the
input ids of <dir>/inputs.json and compare the logits with ZeroMoE's own (<dir>/logits.json, from
an engine initialised from the export). Prints one line per (folder, device) with max |diff| and
exits 1 when any exceeds 1e-4 or a load reports missing/unexpected keys.
"""

import argparse
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    ids = torch.tensor(json.load(open(f"{a.dir}/inputs.json"))["input_ids"], dtype=torch.long)
    ours = json.load(open(f"{a.dir}/logits.json"))
    want = torch.tensor(ours["logits"], dtype=torch.float32).reshape(ours["shape"])
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    results = []
    ok = True
    for sub in ["save16", "fp32"]:
        model, info = AutoModelForCausalLM.from_pretrained(f"{a.dir}/{sub}", torch_dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
        bad_keys = {k: v for k, v in info.items() if v}
        if bad_keys:
            ok = False
        model.eval()
        for dev in devices:
            if dev == "cuda":
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
            m = model.to(dev)
            with torch.no_grad():
                got = m(input_ids=ids.to(dev)).logits.float().cpu()
            diff = (got - want).abs().max().item()
            line = {"export": sub, "device": dev, "max_abs_diff": diff, "logit_scale": want.abs().max().item(), "loading_info": {k: list(v) for k, v in info.items()}}
            results.append(line)
            print(json.dumps(line))
            if not diff <= 1e-4:
                ok = False
    env = {"torch": torch.__version__, "transformers": __import__("transformers").__version__, "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    print(json.dumps({"ok": ok, **env}))
    if a.out:
        json.dump({"ok": ok, "results": results, **env}, open(a.out, "w"), indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
