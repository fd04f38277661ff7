#!/usr/bin/env python3
"""A PyTorch CNN trained the way people write it: torch's default thread
settings (no set_num_threads, no OMP_NUM_THREADS) and a 2-worker DataLoader
over a synthetic, seeded image dataset. Used by the integration tests and
bench/job/bench_parked_quiet.py to see what a parked job's threads and worker
processes do while another job has the device.

The loop measures itself: it records the monotonic time when its first
iteration starts and when the last ends, and every loss, and writes them to
--result (JSON). With --start-file the job imports, builds its model and
starts its DataLoader workers, writes RESULT.ready, then waits for that file
to exist before its first boundary, so that a bench can start the clocks of several jobs together
with their start-up already behind them.

usage: loader_cnn_job.py --iterations N --result FILE [--workers 2] [--start-file F]
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gandiva
import gandiva.torch


class SyntheticImages(torch.utils.data.Dataset):
    """Image i is a function of i alone (seeded), so any worker makes the same one."""

    def __init__(self, size, classes=10):
        self.size, self.classes = size, classes

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        label = int(torch.randint(0, self.classes, (1,), generator=g))
        image = torch.randn(1, 28, 28, generator=g)
        r, c = divmod(label, 4)
        image[0, 2 + r * 7 : 7 + r * 7, 2 + c * 6 : 7 + c * 6] += 0.4
        return image, label


class Cnn(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--start-file", help="wait for this file before the first iteration")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result", required=True)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    model = Cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = torch.utils.data.DataLoader(
        SyntheticImages(4096), batch_size=args.batch, shuffle=True, num_workers=args.workers,
        persistent_workers=args.workers > 0, generator=torch.Generator().manual_seed(args.seed))
    batches = iter(loader)  # starts the workers (they prefetch meanwhile)
    if args.start_file:
        open(args.result + ".ready", "w").close()
    while args.start_file and not os.path.exists(args.start_file):
        time.sleep(0.005)
    state = gandiva.torch.register(model, optimizer, extra={"losses": []})
    gandiva.torch.attach(optimizer)  # first boundary: may wait here for the device

    losses = state.extra["losses"]
    start = time.monotonic()
    done = 0
    while done < args.iterations:
        for images, labels in batches:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            losses.append(loss.item())
            optimizer.step()  # gandiva marks the boundary here
            done += 1
            if done == args.iterations:
                break
        else:
            batches = iter(loader)  # the next epoch
    end = time.monotonic()
    with open(args.result, "w") as f:
        json.dump({"iterations": args.iterations, "start_s": start,
                   "end_s": end, "elapsed_s": end - start, "losses": losses,
                   "threads": torch.get_num_threads()}, f)
    print(f"[loader-cnn] done: {args.iterations} iterations, {end - start:.2f} s measured",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
