#!/usr/bin/env python3
"""A real (tiny) PyTorch training job for the cluster scheduler's tests: a
fixed number of SGD steps on a small MLP, each at least --step-ms long, its
model, optimizer and step count registered with gandiva so the scheduler can
checkpoint it, and restart or migrate it. Batch k is drawn from a generator
seeded with k, so a run restored from any checkpoint ends with the same
weights and the same loss at every step as one never interrupted (--result
holds the weights' digest and the loss history, as exact hex floats).

usage: sched_job.py --steps N [--step-ms MS] [--result FILE]
"""

import argparse
import hashlib
import json
import os
import time

import torch

import gandiva
import gandiva.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=20.0)
    ap.add_argument("--result")
    args = ap.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    state = gandiva.torch.register(model, optimizer,
                                   extra={"step": 0, "resumed_at": None, "losses": []})
    gandiva.torch.attach(optimizer)  # a restoring process loads its state at the first boundary
    if state.restored:
        state.extra["resumed_at"] = state.extra["step"]
    print(f"pid {os.getpid()} starts at step {state.extra['step']}", flush=True)
    while state.extra["step"] < args.steps:
        start = time.monotonic()
        g = torch.Generator().manual_seed(state.extra["step"])
        x = torch.randn(16, 32, generator=g)
        optimizer.zero_grad()
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        loss.backward()
        state.extra["losses"].append(loss.item())
        state.extra["step"] += 1
        while time.monotonic() - start < args.step_ms / 1000:
            time.sleep(0.001)
        optimizer.step()  # the boundary: a checkpoint holds the steps done so far
    digest = hashlib.sha256()
    for t in model.state_dict().values():
        digest.update(t.detach().contiguous().numpy().tobytes())
    print(f"done: {args.steps} steps, loss {loss.item():.6f}", flush=True)
    if args.result:
        with open(args.result, "w") as f:
            json.dump({"steps": state.extra["step"], "weights_sha256": digest.hexdigest(),
                       "resumed_at": state.extra["resumed_at"],
                       "losses": [float.hex(v) for v in state.extra["losses"]]}, f)


if __name__ == "__main__":
    main()
