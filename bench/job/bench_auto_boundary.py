#!/usr/bin/python3
"""bench_auto_boundary: what the automatic PyTorch boundary costs per iteration.

Jobs gandiva starts load its start-up hook (gandiva/_startup), which makes
every optimizer step an iteration boundary (gandiva/_autotorch.py). This
measures, in one process with the hook loaded as `gandiva run` loads it (its
folder first on PYTHONPATH, a control block named; the block does not exist,
so the runtime runs unmanaged: the same boundary fast path, no park):

  none      optimizer.step() with the hook uninstalled       (the baseline)
  manual    optimizer.step(); gandiva.step()                  (what a script writes by hand)
  auto      optimizer.step() with the hook                    (no change to the script)
  yielding  the hook in a script that marks its own boundaries (it only checks and steps aside)

for two optimizers: `noop` (a torch.optim.Optimizer subclass whose step does
nothing) and `sgd` (torch's SGD on one 1-element parameter, the cheapest real
step); and, apart from any step, the hook's own two calls (before and after a
step, marking the boundary) against a bare gandiva.step(). Each figure is the
median over blocks of per-iteration time, the modes alternating block by block
(the hook uninstalled and installed again between them) so that drift in the
machine's load falls on all alike; a mode's cost is its time minus `none`'s of
the same phase, in ns. Phase 1 measures `auto`; phase 2, after the first
gandiva.step() (which makes the hook step aside for good, as in a script),
`manual` and `yielding`. Timings on a shared machine are noisy: compare within
one run. Prints a table, writes bench_auto_boundary.json.

  /usr/bin/python3 bench/job/bench_auto_boundary.py --build-dir build --out DIR
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time
import torch
from gandiva import _autotorch
import gandiva

assert _autotorch._installed, "the start-up hook did not install"
iters, blocks = int(sys.argv[1]), int(sys.argv[2])

class Noop(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {})
    def step(self, closure=None):
        return None

def make(kind):
    p = torch.nn.Parameter(torch.zeros(1))
    p.grad = torch.ones(1)
    return Noop([p]) if kind == "noop" else torch.optim.SGD([p], lr=0.0)

def block(fn):
    t = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t) / iters

def steps(opt, manual=False):
    step, mark = opt.step, gandiva.step
    def run():
        if manual:
            for _ in range(iters):
                step(); mark()
        else:
            for _ in range(iters):
                step()
    return run

def hook_alone():
    o = make("noop")
    before, after = _autotorch._before, _autotorch._after
    def run():
        for _ in range(iters):
            before(o); after(o)
    return run

def step_alone():
    mark = gandiva.step
    def run():
        for _ in range(iters):
            mark()
    return run

# Modes alternate block by block (the hook installed and uninstalled between
# them), so that drift in the machine's load falls on both alike. Phase 1: the
# hook marks boundaries; phase 2, after the script's first gandiva.step(): it
# steps aside, and the hand-written boundary is measured.
samples = {k: {"none": [], "auto": [], "none2": [], "manual": [], "yielding": []}
           for k in ("noop", "sgd")}
alone = {"hook": [], "gandiva.step()": []}
for _ in range(blocks):
    for kind in ("noop", "sgd"):
        samples[kind]["auto"].append(block(steps(make(kind))))
    alone["hook"].append(block(hook_alone()))
    _autotorch.uninstall()
    for kind in ("noop", "sgd"):
        samples[kind]["none"].append(block(steps(make(kind))))
    _autotorch.install(torch)
counted_by_hook = gandiva.stats()["iterations"]
for _ in range(blocks):
    alone["gandiva.step()"].append(block(step_alone()))
    for kind in ("noop", "sgd"):
        samples[kind]["manual"].append(block(steps(make(kind), manual=True)))
        samples[kind]["yielding"].append(block(steps(make(kind))))
    _autotorch.uninstall()
    for kind in ("noop", "sgd"):
        samples[kind]["none2"].append(block(steps(make(kind))))
    _autotorch.install(torch)
med = statistics.median
out = {k: {m: med(v) for m, v in modes.items()} for k, modes in samples.items()}
out["alone"] = {m: med(v) for m, v in alone.items()}
out["counted_by_hook"] = counted_by_hook
out["how"] = _autotorch._installed
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--out", default=".")
    ap.add_argument("--iterations", type=int, default=20000, help="per block")
    ap.add_argument("--blocks", type=int, default=9)
    args = ap.parse_args()
    py = os.path.join(os.path.abspath(args.build_dir), "python")
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.join(py, "gandiva", "_startup"), py]),
               GANDIVA_CONTROL_BLOCK="/gandiva.bench-auto-boundary-none")
    env.pop("GANDIVA_AUTO_TORCH", None)
    r = subprocess.run(["/usr/bin/python3", "-c", CHILD, str(args.iterations), str(args.blocks)],
                       env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit(f"bench_auto_boundary: the measuring process failed:\n{r.stderr}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    rows = []
    print(f"hook: {res['how']}; ns per iteration, median of {args.blocks} blocks of "
          f"{args.iterations}, modes alternating block by block")
    print(f"{'what':<34}{'ns/iter':>10}{'cost ns':>10}{'vs manual':>11}")
    hook, manual = res["alone"]["hook"], res["alone"]["gandiva.step()"]
    for what, ns in (("the hook alone (before+after)", hook), ("gandiva.step() alone", manual)):
        rows.append({"what": what, "ns_per_iteration": ns, "cost_ns": ns,
                     "cost_vs_manual": ns / manual})
        print(f"{what:<34}{ns:>10.0f}{ns:>10.0f}{ns / manual:>10.2f}x")
    for kind in ("noop", "sgd"):
        f = res[kind]
        manual_cost = f["manual"] - f["none2"]
        for mode, base in (("none", "none"), ("auto", "none"), ("none2", "none2"),
                           ("manual", "none2"), ("yielding", "none2")):
            cost = f[mode] - f[base]
            ratio = cost / manual_cost if mode in ("auto", "yielding") and manual_cost > 0 else None
            what = f"{kind} step, {mode}"
            rows.append({"what": what, "ns_per_iteration": f[mode], "cost_ns": cost,
                         "cost_vs_manual": ratio})
            print(f"{what:<34}{f[mode]:>10.0f}{cost:>10.0f}"
                  f"{'' if ratio is None else f'{ratio:>10.2f}x'}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_auto_boundary.json")
    with open(path, "w") as f:
        json.dump({"how": res["how"], "iterations_per_block": args.iterations,
                   "blocks": args.blocks, "rows": rows}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
