#!/usr/bin/env python3
"""Hyper-parameter search the Gandiva way: successive halving over a scheduler.

Submits every trial (trial.py, one per learning rate x width) to a gandiva
scheduler at once, reads each trial's progress lines through the scheduler
(read_log), and at each rung (after 1, 2, 4 epochs by default), once every
surviving trial has reported that epoch, keeps the best --keep fraction and
cancels the rest. Records when the first trial reached --target accuracy and
which configuration it was (from the epoch line's own timestamp). Prints a table
and, with --out, writes JSON. Works against any scheduler endpoint; what the
policy does with 16 trials on a few devices is what decides how soon the
search learns which trials are worth their devices (docs/scheduler.md,
"Hyper-parameter search").

    search.py --scheduler ipc:///tmp/gc/scheduler.sock --out search.json
"""

import argparse
import itertools
import json
import math
import os
import random
import re
import sys
import time

import gandiva

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^epoch (\d+) accuracy ([0-9.]+|nan) loss (\S+) time ([0-9.]+)$", re.M)
ENDED = ("finished", "failed", "cancelled")


def parse_floats(text):
    return [float(v) for v in text.split(",")]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", help="the scheduler's endpoint (default $GANDIVA_SCHEDULER)")
    ap.add_argument("--lrs", type=parse_floats, default=parse_floats(
        "0.0003,0.001,0.003,0.01,0.03,0.1,0.3,1.0"), help="learning rates (comma-separated)")
    ap.add_argument("--widths", type=parse_floats, default=[16, 256], help="MLP widths")
    ap.add_argument("--epochs", type=int, default=30, help="each trial's budget")
    ap.add_argument("--rungs", default="1,2,4", help="epochs at which the best --keep survive")
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--target", type=float, default=0.90, help="test accuracy to reach")
    ap.add_argument("--stop-at-target", action="store_true",
                    help="cancel every trial once one reached --target")
    ap.add_argument("--seed", type=int, default=0, help="shuffles the order of submission")
    ap.add_argument("--trial-args", default="", help="more flags for trial.py, e.g. '--train 4000'")
    ap.add_argument("--poll-s", type=float, default=0.5)
    ap.add_argument("--timeout-s", type=float, default=900)
    ap.add_argument("--out", help="write the result here (JSON)")
    args = ap.parse_args(argv)
    args.rungs = sorted(int(r) for r in args.rungs.split(","))
    return args


class Trial:
    def __init__(self, lr, width):
        self.lr, self.width = lr, int(width)
        self.id = None
        self.state = "queued"
        self.history = {}  # epoch -> (accuracy, time)
        self.stopped_at_rung = None

    @property
    def name(self):
        return f"lr{self.lr:g}-w{self.width}"

    def epochs(self):
        return max(self.history, default=0)

    def best(self):
        return max((a for a, _ in self.history.values()), default=float("nan"))

    def accuracy_at(self, epoch):
        entry = self.history.get(epoch)
        return entry[0] if entry and not math.isnan(entry[0]) else -1.0

    def as_json(self):
        return {"id": self.id, "lr": self.lr, "width": self.width, "state": self.state,
                "epochs": self.epochs(), "best_accuracy": self.best(),
                "stopped_at_rung": self.stopped_at_rung,
                "accuracy": {e: a for e, (a, _) in sorted(self.history.items())}}


def submit_all(client, trials, args):
    command = [sys.executable, os.path.join(HERE, "trial.py"), "--epochs", str(args.epochs),
               *args.trial_args.split()]
    for t in trials:
        t.id = client.submit(command + ["--lr", repr(t.lr), "--width", str(t.width)],
                             cwd=HERE, name=t.name, restartable=True)


def read_progress(client, trial):
    """Every epoch line of the trial's current run (a restored run prints the old ones again)."""
    try:
        data = client.read_log(trial.id, offset=0)["data"]
    except gandiva.GandivaError:
        return  # not started yet, or its node is busy: next poll
    for epoch, accuracy, _, stamp in LINE.findall(data):
        trial.history[int(epoch)] = (float(accuracy), float(stamp))


def first_to_target(trials, target):
    """(seconds since epoch, trial, epoch) of the earliest line at or above target, or None."""
    hits = [(stamp, t, e) for t in trials for e, (a, stamp) in t.history.items() if a >= target]
    return min(hits, key=lambda h: h[0]) if hits else None


def halve_if_rung_complete(client, alive, rung, keep):
    """At a rung: once every alive trial reached it or ended, keep the best and
    cancel the others; returns the survivors, or None while the rung is open."""
    if any(t.state not in ENDED and t.epochs() < rung for t in alive):
        return None
    ranked = sorted(alive, key=lambda t: t.accuracy_at(rung), reverse=True)
    survivors = max(1, math.ceil(len(ranked) * keep))
    for t in ranked[survivors:]:
        t.stopped_at_rung = rung
        if t.state not in ENDED:
            client.cancel(t.id)
    return [t for t in ranked[:survivors] if t.state not in ENDED or t.epochs() >= rung]


def run_search(client, args):
    trials = [Trial(lr, w) for lr, w in itertools.product(args.lrs, args.widths)]
    random.Random(args.seed).shuffle(trials)
    start = time.time()
    submit_all(client, trials, args)
    alive, rungs, hit = list(trials), list(args.rungs), None
    while time.time() - start < args.timeout_s:
        states = {j["id"]: j["state"] for j in client.queue(all=True)}
        for t in trials:
            if t.state not in ENDED or not t.history:
                read_progress(client, t)
            t.state = states.get(t.id, t.state)
        hit = hit or first_to_target(trials, args.target)
        if hit and args.stop_at_target:
            break
        while rungs:
            survivors = halve_if_rung_complete(client, alive, rungs[0], args.keep)
            if survivors is None:
                break
            alive = survivors
            rungs.pop(0)
        if all(t.state in ENDED for t in trials):
            break
        time.sleep(args.poll_s)
    for t in trials:
        if t.state not in ENDED:
            client.cancel(t.id)
    return trials, start, time.time(), hit


def result(trials, start, end, hit, args, endpoint):
    out = {"scheduler": endpoint, "trials": len(trials), "epochs": args.epochs,
           "rungs": args.rungs, "keep": args.keep, "target": args.target, "seed": args.seed,
           "trial_args": args.trial_args, "wall_s": end - start,
           "submission_order": [t.name for t in trials],
           "time_to_target_s": None, "first_to_target": None,
           "trials_detail": [t.as_json() for t in trials]}
    if hit:
        stamp, t, epoch = hit
        out["time_to_target_s"] = stamp - start
        out["first_to_target"] = {"name": t.name, "id": t.id, "lr": t.lr, "width": t.width,
                                  "epoch": epoch, "submission_position": trials.index(t) + 1}
    out["reached_target"] = sorted(t.name for t in trials if t.best() >= args.target)
    return out


def print_table(out):
    print(f"{'trial':>5} {'config':<14} {'epochs':>6} {'best acc':>8}  end")
    for t in sorted(out["trials_detail"], key=lambda t: t["id"]):
        how = t["state"] + (f" (cut at rung {t['stopped_at_rung']})" if t["stopped_at_rung"] else "")
        print(f"{t['id']:>5} {'lr%g-w%d' % (t['lr'], t['width']):<14} {t['epochs']:>6} "
              f"{t['best_accuracy']:>8.4f}  {how}")
    first = out["first_to_target"]
    if first:
        print(f"target {out['target']} first reached after {out['time_to_target_s']:.1f} s by "
              f"{first['name']} at epoch {first['epoch']} (submitted #{first['submission_position']})")
    else:
        print(f"target {out['target']} not reached in {out['wall_s']:.1f} s")


def main():
    args = parse_args()
    client = gandiva.SchedulerClient(args.scheduler)
    trials, start, end, hit = run_search(client, args)
    out = result(trials, start, end, hit, args, client.endpoint)
    print_table(out)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if hit else 1


if __name__ == "__main__":
    sys.exit(main())
