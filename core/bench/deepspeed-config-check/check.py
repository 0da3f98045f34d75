#!/usr/bin/env python3
"""Check ZeroMoE's DeepSpeed key handling against DeepSpeed itself.

Usage: python3 core/bench/deepspeed-config-check/check.py <OUT of make.ts>/cases.json

Each case's config is built with deepspeed.runtime.config.DeepSpeedConfig (the class
deepspeed.initialize builds from a config dict; no process group needed: it falls back to world
size 1). Printed per case: DeepSpeed's verdict (accepted, or refused with its exception) next to
ZeroMoE's. Pass when
- every "default" case (one DeepSpeed 0.19 key at its default) is accepted by both, and
- every case ZeroMoE refuses is a "feature-on" case (a feature ZeroMoE lacks), whatever DeepSpeed says.
Exit status 0 on pass, else 1.
"""

import json
import sys

import deepspeed
from deepspeed.runtime.config import DeepSpeedConfig


def main() -> int:
    cases = json.load(open(sys.argv[1]))
    print(f"deepspeed {deepspeed.__version__}: {len(cases)} cases")
    bad = 0
    for c in cases:
        try:
            DeepSpeedConfig(c["config"])
            ds = "accepted"
        except Exception as e:  # noqa: BLE001 - DeepSpeed raises many types
            ds = f"refused: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        ok = True
        if c["kind"] == "default" and (ds != "accepted" or c["ours"] != "accepted"):
            ok = False
        if c["ours"] == "refused" and c["kind"] != "feature-on":
            ok = False
        bad += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {c['name']}: deepspeed {ds}; zeromoe {c['ours']}{(': ' + c['message'][:160]) if c['message'] else ''}")
    print(f"{len(cases) - bad} of {len(cases)} as expected")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
