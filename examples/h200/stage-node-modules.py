#!/usr/bin/env python3
"""Re-stage .device/node_modules.tar.xz for the H200 after .device/ is packed.

The packer copies node_modules/@zeromoe/* through the workspace links: whole workspaces with their own
node_modules (178 MiB, over the device call's 64 MiB carry), while the packages that only `core`
depends on (bun's isolated install keeps them under node_modules/.bun) are left out. This keeps the
workspace links as links and copies every package a workspace depends on, transitively, hoisted to
the root node_modules (about 46 MiB for .device in all). Dev-only packages are skipped.

Run from the repository root after packing: python3 examples/h200/stage-node-modules.py
"""
import os, json, shutil, subprocess, tempfile
root = os.getcwd()
stage = tempfile.mkdtemp()
nm = os.path.join(stage, "node_modules"); os.makedirs(nm)
SKIP = {"typescript", "bun-types", "deno", "@types", "@webgpu", "@deno"}
def skip(name): return name in SKIP or name.split("/")[0] in SKIP
queue = []
def entries(d):
    for e in os.listdir(d):
        if e.startswith("."): continue
        p = os.path.join(d, e)
        if e.startswith("@") and os.path.isdir(p) and not os.path.islink(p):
            for f in os.listdir(p): yield e + "/" + f, os.path.join(p, f)
        else: yield e, p
ws = [os.path.dirname(l) for l in subprocess.check_output(["git", "ls-files", "--", "*package.json"], text=True).split() ]
for d in ["."] + [w for w in ws if w != "."]:
    dn = os.path.join(root, d, "node_modules")
    if not os.path.isdir(dn): continue
    for name, p in entries(dn):
        if name.startswith("@zeromoe/"):
            dst = os.path.join(stage, d, "node_modules", name)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.lexists(dst): os.symlink(os.readlink(p), dst)
            continue
        if skip(name) or not os.path.exists(p): continue
        queue.append((name, os.path.realpath(p)))
seen = set()
while queue:
    name, real = queue.pop()
    if name in seen: continue
    seen.add(name)
    shutil.copytree(real, os.path.join(nm, name), symlinks=False, ignore=shutil.ignore_patterns("node_modules"))
    base = os.path.dirname(real) if "/" not in name else os.path.dirname(os.path.dirname(real))
    pj = json.load(open(os.path.join(real, "package.json")))
    for dep in list(pj.get("dependencies", {})) + list(pj.get("optionalDependencies", {})):
        for cand in (os.path.join(real, "node_modules", dep), os.path.join(base, dep)):
            if os.path.exists(cand): queue.append((dep, os.path.realpath(cand))); break
g = os.path.join(nm, "gpt-tokenizer")
if os.path.isdir(g):
    for sub in ("cjs", "dist", "src", "data"): shutil.rmtree(os.path.join(g, sub), ignore_errors=True)
    for dp, _, fs in os.walk(os.path.join(g, "esm")):
        for f in fs:
            if f.endswith(".map") or f.endswith(".d.ts") or ("bpeRanks" in dp and f != "r50k_base.js"): os.remove(os.path.join(dp, f))
print(len(seen), "packages;", subprocess.check_output(["du", "-sh", stage], text=True).strip())
subprocess.check_call(f"tar -C {stage} -cf - . | xz -T0 -6 > .device/node_modules.tar.xz", shell=True)
shutil.rmtree(stage)
