#!/usr/bin/env python3
"""A real (tiny) PyTorch training job for integration tests: trains a small MLP
and records, per iteration, its start and end on CLOCK_MONOTONIC, so a test can
check that time-sliced jobs never run an iteration at the same time and are
parked only between iterations.

usage: interval_job.py --iterations N --out FILE [--work-ms MS] [--exit-code C]
"""

import argparse
import json
import sys
import time

import torch

import gandiva
import gandiva.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--work-ms", type=float, default=4.0, help="minimum time per iteration")
    ap.add_argument("--out", required=True)
    ap.add_argument("--exit-code", type=int, default=0)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    gandiva.torch.attach(optimizer)  # first boundary: may wait here for the device

    intervals = []
    for _ in range(args.iterations):
        start = time.monotonic_ns()
        x = torch.randn(32, 64)
        while True:  # a real step, repeated until the iteration has its minimum length
            optimizer.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            if (time.monotonic_ns() - start) / 1e6 >= args.work_ms:
                break
        end = time.monotonic_ns()
        intervals.append([start, end])
        optimizer.step()  # boundary
        # Flush as we go so a test can read progress while the job is parked.
        if len(intervals) % 10 == 0:
            _dump(args.out, intervals, False)
    _dump(args.out, intervals, True)
    return args.exit_code


def _dump(path, intervals, done):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"intervals": intervals, "done": done, "managed": gandiva.managed(),
                   "stats": gandiva.stats()}, f)
    import os
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
