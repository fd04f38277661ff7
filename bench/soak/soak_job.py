#!/usr/bin/env python3
"""The soak bench's job: a small MLP trained with SGD until it is told to stop,
counting its own iterations. gandivad sees each optimizer.step() as a boundary
(gandiva.torch.attach), so the bench can compare gandivad's count with ours.

It stops on SIGTERM or when --stop-file exists, writes {"iterations": n} to
--result and exits 0. One thread and a small model (a few ms a step), so that
dozens of them can share two cores.

usage: soak_job.py --result FILE [--stop-file FILE] [--width 256]
"""

import argparse
import json
import os
import signal

import torch

import gandiva
import gandiva.torch

stop = False


def on_term(signum, frame):
    # Only set a flag: the loop finishes the step it is in, so that the count we
    # write is of whole steps, each of which reached gandivad's boundary.
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--result", required=True)
    ap.add_argument("--stop-file")
    ap.add_argument("--width", type=int, default=256)
    args = ap.parse_args()

    torch.set_num_threads(1)  # 32 jobs on 2 cores: intra-op threads would only fight
    signal.signal(signal.SIGTERM, on_term)
    torch.manual_seed(os.getpid())
    w = args.width
    model = torch.nn.Sequential(torch.nn.Linear(w, 2 * w), torch.nn.ReLU(), torch.nn.Linear(2 * w, w))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    gandiva.torch.register(model, optimizer)
    gandiva.torch.attach(optimizer)  # a boundary after every optimizer.step(), and one now
    x = torch.randn(64, w)
    y = torch.randn(64, w)
    n = 0
    while not stop and not (args.stop_file and os.path.exists(args.stop_file)):
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()  # the boundary: gandivad may park us here
        n += 1
    with open(args.result + ".tmp", "w") as f:
        json.dump({"iterations": n}, f)
    os.replace(args.result + ".tmp", args.result)  # the bench never reads half a file


if __name__ == "__main__":
    main()
