#!/usr/bin/env python3
"""One trial of a hyper-parameter search: an MLP learning a synthetic task.

The task is the same for every trial (made from --data-seed, nothing is
downloaded): points in 16 dimensions labelled into 4 classes by a fixed random
"teacher" network, so it is learnable but not trivial. The student is an MLP
of width --width trained with SGD (momentum 0.9) at --lr. Too small a learning
rate learns slowly, too large a one diverges, too narrow a network cannot fit
the teacher: only some configurations reach a high accuracy.

After each epoch it prints one line, flushed, that a search driver parses
(docs/scheduler.md, "Hyper-parameter search"):

    epoch 3 accuracy 0.8120 loss 0.4210 time 1763900000.123

(`time`: the wall clock when the epoch's evaluation ended). Its state is
registered with gandiva.torch.register and a boundary is marked after every
optimizer step (gandiva.torch.attach), so the scheduler can time-slice,
checkpoint and migrate it at any iteration; a restored trial prints the lines
of the epochs it had done again, so that its new log is complete.

    /usr/bin/python3 examples/automl/trial.py --lr 0.1 --width 64
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gandiva.torch

INPUTS, CLASSES, CELLS = 8, 2, 4


def make_task(seed, train, test):
    """(x_train, y_train, x_test, y_test): a checkerboard of CELLS x CELLS squares
    on the first two of INPUTS coordinates (the rest are noise), two classes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(train + test, INPUTS, generator=g) * 2 - 1
    cells = ((x[:, :2] + 1) / 2 * CELLS).floor().long().clamp(max=CELLS - 1)
    y = (cells[:, 0] + cells[:, 1]) % CLASSES
    return x[:train], y[:train], x[train:], y[train:]


def student(width):
    return nn.Sequential(nn.Linear(INPUTS, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, CLASSES))


def evaluate(model, x, y):
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return accuracy, (loss if math.isfinite(loss) else float("inf"))


def report(line):
    print("epoch {epoch} accuracy {accuracy:.4f} loss {loss:.4f} time {time:.3f}".format(**line),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--train", type=int, default=20000, help="training samples (an epoch)")
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--data-seed", type=int, default=0, help="the task: the same for every trial")
    ap.add_argument("--seed", type=int, default=1, help="the student's initial weights and shuffle")
    args = ap.parse_args()

    x, y, x_test, y_test = make_task(args.data_seed, args.train, args.test)
    torch.manual_seed(args.seed)
    model = student(args.width)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    per_epoch = math.ceil(args.train / args.batch)

    state = gandiva.torch.register(model, optimizer, extra={"history": []})  # gandiva
    gandiva.torch.attach(optimizer)  # gandiva: a boundary after every step; a restore loads here
    for line in state.extra["history"]:  # a restored trial: its new log starts complete
        report(line)

    total = args.epochs * per_epoch
    while True:
        # An epoch's line is written at the top of the loop, not after its last step: a
        # checkpoint taken at that step's boundary is then evaluated again once restored.
        epoch, batch = divmod(state.iteration, per_epoch)
        if len(state.extra["history"]) < epoch:
            accuracy, loss = evaluate(model, x_test, y_test)
            line = {"epoch": epoch, "accuracy": accuracy, "loss": loss, "time": time.time()}
            state.extra["history"].append(line)
            report(line)
        if state.iteration >= total:
            break
        # The epoch's order follows from (seed, epoch) alone: nothing to save for it.
        order = torch.randperm(args.train, generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        idx = order[batch * args.batch:(batch + 1) * args.batch]
        optimizer.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        optimizer.step()  # counts state.iteration, then the boundary

if __name__ == "__main__":
    main()
