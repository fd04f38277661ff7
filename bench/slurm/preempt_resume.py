#!/usr/bin/env python3
"""Preemption to resume under a real Slurm (issue 13): how long a preempted
gandiva job is away, and how many iterations it loses.

A real Slurm 22.05 on this machine (tests/integration/slurm_cluster.py: two
nodes, each a slurmd and a gandivad in its own namespaces; PreemptMode=REQUEUE,
GraceTime=0, KillWait=5, cred_expire=5) with gandiva_spank.so. Each round:

1. a low-partition job (`--gandiva --requeue`, with `--gandiva-checkpoint=DIR`
   or, for the baseline, without) runs tests/integration/jobs/sched_job.py
   (a small PyTorch MLP, --step-ms per step) on n1 until it has done --warm
   steps;
2. a high-partition job asks for n1; from its submission (t=0) we time: the
   low job's save on SIGTERM (its log line), its requeue (Restarts 1), and its
   start again on n2 (its "starts at step K" line);
3. lost iterations = steps it had done when it ended on n1 minus K.

Prints a table and writes DIR/preempt_resume.json.
usage: preempt_resume.py [--build-dir build] [--out DIR] [--rounds 3] [--step-ms 20]
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--build-dir", default=str(ROOT / "build"))
ap.add_argument("--out", default=".")
ap.add_argument("--rounds", type=int, default=3, help="rounds with --gandiva-checkpoint")
ap.add_argument("--step-ms", type=float, default=20.0)
ap.add_argument("--warm", type=int, default=60, help="steps done before the preemption")
ARGS = ap.parse_args()

os.environ["GANDIVA_BUILD_DIR"] = os.path.abspath(ARGS.build_dir)  # read at import
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from conftest import wait_for  # noqa: E402
from sched_cluster import SCHED_JOB  # noqa: E402
from slurm_cluster import SlurmCluster  # noqa: E402
from test_slurm import job_script, plugstack  # noqa: E402

STARTS = re.compile(r"starts at step (\d+)")
SAVED = re.compile(r"SIGTERM: saved the state after (\d+) iterations .* \(\d+ bytes, ([\d.]+) ms\)")


def one_round(cluster, root, n, checkpoint):
    ckpt = root / f"ckpt{n}"
    opts = ["-p", "low", "--requeue", "--open-mode=append", "--gandiva"]
    if checkpoint:
        opts.append(f"--gandiva-checkpoint={ckpt}")
    low = cluster.sbatch(*opts, script=job_script(SCHED_JOB, "--steps", 100000, "--step-ms", ARGS.step_ms))
    assert cluster.wait_state(low, "RUNNING", timeout=60)["NodeList"] == "n1"
    name = f"slurm-{low}.batch"

    def steps_on_n1():
        return [j["iterations"] for j in cluster.node_jobs("n1") if j["name"] == name]

    wait_for(lambda: (steps_on_n1() or [0])[0] >= ARGS.warm, 120, "the low job's warm-up")
    t0 = time.monotonic()
    high = cluster.sbatch("-p", "high", "-w", "n1", wrap="sleep 600")
    saved_at = requeued_at = None
    while True:
        now = time.monotonic() - t0
        out = cluster.output(low)
        if saved_at is None and SAVED.search(out):
            saved_at = now
        if requeued_at is None and cluster.job(low)["Restarts"] == "1":
            requeued_at = now
        if len(STARTS.findall(out)) >= 2:
            resumed_at = now
            break
        assert now < 120, f"round {n}: the low job did not start again\n{out}\n{cluster.logs()}"
        time.sleep(0.02)
    out = cluster.output(low)
    done_on_n1 = steps_on_n1()[0]  # gandivad's count of its boundaries there
    resumed_step = int(STARTS.findall(out)[1])
    saved = SAVED.search(out)
    row = {"checkpoint": checkpoint, "saved_s": saved_at, "requeued_s": requeued_at,
           "resumed_s": resumed_at, "steps_done": done_on_n1, "resumed_at_step": resumed_step,
           "lost_steps": done_on_n1 - resumed_step,
           "save_ms": float(saved.group(2)) if saved else None,
           "node_after": cluster.job(low)["NodeList"]}
    cluster.slurm("scancel", str(high), str(low))
    wait_for(lambda: cluster.job(low)["JobState"] in ("CANCELLED", "COMPLETED") and
             cluster.job(high)["JobState"] in ("CANCELLED", "COMPLETED"), 60, "both ended")
    return row


def main():
    out_dir = Path(ARGS.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gd-preempt.") as tmp:
        root = Path(tmp)
        with SlurmCluster(root, plugstack_lines=[plugstack(root)], cpus=1, grace_time=0) as cluster:
            for n in range(ARGS.rounds):
                rows.append(one_round(cluster, root, n, checkpoint=True))
            rows.append(one_round(cluster, root, ARGS.rounds, checkpoint=False))

    fmt = "{:<22} {:>9} {:>11} {:>10} {:>11} {:>8} {:>6} {:>8}"
    print(fmt.format("round", "saved s", "requeued s", "resumed s", "steps done", "lost", "node", "save ms"))
    for i, r in enumerate(rows):
        label = f"{i + 1}: --gandiva-checkpoint" if r["checkpoint"] else f"{i + 1}: no checkpoint"
        print(fmt.format(label, "-" if r["saved_s"] is None else f"{r['saved_s']:.2f}",
                         f"{r['requeued_s']:.2f}", f"{r['resumed_s']:.2f}", r["steps_done"],
                         r["lost_steps"], r["node_after"],
                         "-" if r["save_ms"] is None else f"{r['save_ms']:.1f}"))
    print("times from the high-priority job's submission; Slurm holds a requeued job "
          "cred_expire (5 s here, 120 s by default) + 1 s before it can start again")
    result = {"step_ms": ARGS.step_ms, "grace_time_s": 0, "kill_wait_s": 5, "cred_expire_s": 5,
              "rounds": rows}
    (out_dir / "preempt_resume.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out_dir / 'preempt_resume.json'}")


if __name__ == "__main__":
    main()
