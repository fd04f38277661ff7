"""Gradient accumulation, as people write it: backward on every micro-batch,
an AdamW step every --accumulate micro-batches. No gandiva in it."""

import argparse
import json

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--micro-batches", type=int, default=48)
parser.add_argument("--accumulate", type=int, default=4)
parser.add_argument("--result", required=True)
args = parser.parse_args()

torch.manual_seed(2)
model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()

losses, steps = [], 0
optimizer.zero_grad()
for i in range(args.micro_batches):
    x = torch.randn(16, 20)
    target = torch.randint(0, 4, (16,))
    loss = loss_fn(model(x), target) / args.accumulate
    loss.backward()
    losses.append(loss.item())
    if (i + 1) % args.accumulate == 0:
        optimizer.step()
        optimizer.zero_grad()
        steps += 1

with open(args.result, "w") as f:
    json.dump({"steps": steps, "rounds": steps, "losses": losses}, f)
