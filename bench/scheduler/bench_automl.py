#!/usr/bin/env python3
"""Hyper-parameter search, time slicing against FIFO (issue 12, item 5).

Starts a small real cluster on this machine (gandivad nodes with one CPU device
each and a `gandiva scheduler` over them: tests/integration/sched_cluster.py),
runs examples/automl/search.py on it (the same trials, the same submission
order, successive halving) once under `--policy gandiva` (attained-service
levels of a few device-seconds: each trial soon yields its device to trials
that have had less, by suspend-resume, so every trial reports early) and once
under `--policy fifo` (one trial after another on each device), each on a fresh cluster, and reports the time until
the first trial reached the target accuracy under each, and FIFO/gandiva.
Prints a table and writes bench_automl.json (with both searches' full results)
to --out.

    /usr/bin/python3 bench/scheduler/bench_automl.py --build-dir build --out /tmp
"""

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SEARCH = os.path.join(ROOT, "examples", "automl", "search.py")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=".", help="directory for bench_automl.json")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gandiva-flags", default="--las-thresholds 2,8,32",
                    help="the gandiva policy's flags: its attained-service levels in "
                    "device-seconds (a trial past 2 s yields to one that has had less)")
    ap.add_argument("--policies", default="gandiva,fifo")
    ap.add_argument("--seeds", default="0,1,2",
                    help="search.py --seed for each pair of runs: each a submission order")
    ap.add_argument("--timeout-s", type=float, default=200, help="each search's limit")
    ap.add_argument("--keep-dirs", action="store_true", help="keep the clusters' directories")
    ap.add_argument("search_args", nargs="*",
                    help="after --: flags for search.py (e.g. -- --epochs 4 --lrs 0.03,1)")
    return ap.parse_args()


def start_cluster(root, names, policy, gandiva_flags):
    from sched_cluster import SchedCluster
    cluster = SchedCluster(root, names=names, devices="cpu:1")
    flags = gandiva_flags.split() if policy == "gandiva" else []
    cluster.start(*flags, policy=policy)
    return cluster


def run_one(args, policy, seed):
    """One search on a fresh cluster; returns search.py's JSON result."""
    root = pathlib.Path(tempfile.mkdtemp(prefix=f"automl-{policy}-"))
    names = tuple(chr(ord("a") + i) for i in range(args.nodes))
    cluster = start_cluster(root, names, policy, args.gandiva_flags)
    result_file = root / "search.json"
    try:
        env = dict(cluster.env, PYTHONPATH=os.path.join(args.build_dir, "python"))
        env.pop("OMP_NUM_THREADS", None)  # trials run with the default thread settings
        proc = subprocess.run([sys.executable, SEARCH, "--scheduler", cluster.endpoint,
                               "--stop-at-target", "--timeout-s", str(args.timeout_s), "--seed", str(seed), "--out", str(result_file),
                               *args.search_args],
                              env=env, capture_output=True, text=True)
        print(f"--- {policy}, seed {seed} ---\n{proc.stdout}", end="", flush=True)
        if not result_file.exists():
            sys.exit(f"bench_automl: search.py failed under {policy}:\n{proc.stderr}\n"
                     f"{cluster.read_log()}")
        return json.loads(result_file.read_text())
    finally:
        cluster.stop()
        if not args.keep_dirs:
            subprocess.run(["rm", "-rf", str(root)])


def print_summary(args, runs):
    """The table; returns the figures for the JSON (times to target, FIFO/gandiva)."""
    first = runs[0][2]
    print(f"\n{first['trials']} trials, {args.nodes} nodes x 1 CPU device, budget "
          f"{first['epochs']} epochs, rungs {first['rungs']}, keep {first['keep']}, "
          f"target accuracy {first['target']}")
    print(f"{'seed':>4} {'policy':<8} {'time to target':>14}  {'first to reach it':<30} {'wall':>6}")
    times = {}
    for seed, policy, r in runs:
        ttt = r["time_to_target_s"]
        times.setdefault(policy, {})[seed] = ttt
        f = r["first_to_target"]
        who = f"{f['name']} ep {f['epoch']} (#{f['submission_position']})" if f else "-"
        shown = f"{ttt:.1f} s" if ttt is not None else "not reached"
        print(f"{seed:>4} {policy:<8} {shown:>14}  {who:<30} {r['wall_s']:>5.1f}s")
    figures = {"time_to_target_s": times}
    g, f = times.get("gandiva", {}), times.get("fifo", {})
    ratios = {s: f[s] / g[s] for s in g if g[s] and f.get(s)}
    if ratios:
        mean = lambda d: sum(d.values()) / len(d)
        figures["fifo_over_gandiva"] = ratios
        figures["fifo_over_gandiva_of_means"] = mean({s: f[s] for s in ratios}) / mean(
            {s: g[s] for s in ratios})
        print("FIFO / gandiva time to target: " +
              ", ".join(f"seed {s}: {v:.2f}x" for s, v in ratios.items()) +
              f"; of the means: {figures['fifo_over_gandiva_of_means']:.2f}x")
    return figures


def main():
    args = parse_args()
    build = os.path.abspath(args.build_dir)
    os.environ["GANDIVA_BUILD_DIR"] = build  # sched_cluster (conftest) finds gandiva here
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    args.build_dir = build
    if not os.path.exists(os.path.join(build, "cli", "gandiva")):
        sys.exit(f"bench_automl: no {build}/cli/gandiva (build gandiva, gandivad, _gandiva first)")
    load_at_start = os.getloadavg()
    runs = []  # (seed, policy, result)
    for seed in [int(v) for v in args.seeds.split(",")]:
        for policy in args.policies.split(","):
            runs.append((seed, policy, run_one(args, policy, seed)))
    summary = {"bench": "bench_automl", "host": platform.node(), "cpus": os.cpu_count(),
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "nodes": args.nodes, "devices_per_node": 1, "gandiva_flags": args.gandiva_flags,
               "search_args": args.search_args, "load_average_at_start": load_at_start,
               "runs": [{"seed": s, "policy": p, "result": r} for s, p, r in runs]}
    summary["load_average_at_end"] = os.getloadavg()
    summary.update(print_summary(args, runs))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_automl.json"), "w") as out:
        json.dump(summary, out, indent=1)


if __name__ == "__main__":
    main()
