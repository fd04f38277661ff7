#!/usr/bin/env python3
"""A real 2-rank (or N-rank) data-parallel PyTorch job for the gang tests: a
small MLP wrapped in DistributedDataParallel over gloo, fixed seeds, each rank
drawing its own batches. Every rank appends its loss per iteration to a history
kept in its registered state (so a checkpoint, restore or migration carries it)
and writes it to OUT.rank<k> as it goes; a test compares the histories bitwise
with an undisturbed run.

usage (under torchrun): ddp_job.py --iterations N --out PREFIX [--work-ms MS]
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

import gandiva
import gandiva.torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--work-ms", type=float, default=0.0, help="extra time per iteration")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    state = gandiva.torch.register(model, optimizer, generators=[data],
                                   extra={"losses": [], "restored_at": None})
    gandiva.torch.attach(optimizer)  # first boundary: restores here, may park here
    if state.restored:
        state.extra["restored_at"] = state.iteration

    out = f"{args.out}.rank{rank}"
    while state.iteration < args.iterations:
        start = time.monotonic()
        x = torch.randn(16, 32, generator=data)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # the allreduce of the gradients: every rank must be here
        state.extra["losses"].append(loss.item().hex())
        while (time.monotonic() - start) * 1e3 < args.work_ms:
            time.sleep(0.0005)
        optimizer.step()  # boundary
        if state.iteration % 5 == 0:
            _dump(out, state, False)
    _dump(out, state, True)
    dist.destroy_process_group()


def _device():
    """The device this rank was given: of GANDIVA_DEVICES, the LOCAL_RANK-th
    (modulo their count); a GPU job would use torch.device("cuda", k) so."""
    devices = os.environ.get("GANDIVA_DEVICES", "").split(",")
    return devices[int(os.environ.get("LOCAL_RANK", "0")) % len(devices)]


def _dump(path, state, done):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"losses": state.extra["losses"], "iteration": state.iteration, "done": done,
                   "restored_at": state.extra["restored_at"], "managed": gandiva.managed(),
                   "pid": os.getpid(), "stats": gandiva.stats(), "device": _device()}, f)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
