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
nothing, so that the figure is the hook's own cost) and `sgd` (torch's SGD on
one 1-element parameter, the cheapest real step). Each figure is the median
over blocks of per-iteration time; the cost of a mode is its time minus
`none`'s, in ns. `auto` runs before `manual`: the first gandiva.step() makes
the hook step aside for good (as it does in a script), which is `yielding`.
Timings on a shared machine are noisy: compare within one run.

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

def per_iteration(opt, manual):
    step, mark = opt.step, gandiva.step
    out = []
    for _ in range(blocks):
        t = time.perf_counter_ns()
        if manual:
            for _ in range(iters):
                step(); mark()
        else:
            for _ in range(iters):
                step()
        out.append((time.perf_counter_ns() - t) / iters)
    return statistics.median(out)

results = {}
for kind in ("noop", "sgd"):
    results[kind] = {"auto": per_iteration(make(kind), False)}
_autotorch.uninstall()
for kind in ("noop", "sgd"):
    results[kind]["none"] = per_iteration(make(kind), False)
    results[kind]["manual"] = per_iteration(make(kind), True)
_autotorch.install(torch)  # the script marked its own now: the hook steps aside
for kind in ("noop", "sgd"):
    results[kind]["yielding"] = per_iteration(make(kind), False)
results["counted"] = gandiva.stats()["iterations"]
results["how"] = _autotorch._installed
print(json.dumps(results))
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
    print(f"hook: {res['how']}; ns per iteration (median of {args.blocks} blocks of "
          f"{args.iterations}); cost = mode - none")
    print(f"{'optimizer':<10}{'mode':<10}{'ns/iter':>10}{'cost ns':>10}{'vs manual':>11}")
    for kind in ("noop", "sgd"):
        f = res[kind]
        manual_cost = f["manual"] - f["none"]
        for mode in ("none", "manual", "auto", "yielding"):
            cost = f[mode] - f["none"]
            ratio = cost / manual_cost if mode != "none" and manual_cost > 0 else None
            rows.append({"optimizer": kind, "mode": mode, "ns_per_iteration": f[mode],
                         "cost_ns": cost, "cost_vs_manual": ratio})
            print(f"{kind:<10}{mode:<10}{f[mode]:>10.0f}{cost:>10.0f}"
                  f"{'' if ratio is None else f'{ratio:>10.2f}x'}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_auto_boundary.json")
    with open(path, "w") as f:
        json.dump({"how": res["how"], "iterations_per_block": args.iterations,
                   "blocks": args.blocks, "rows": rows}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
