"""A plain PyTorch training loop, as people write it (no gandiva in it): a small
MLP on synthetic regression data, SGD with momentum. Writes the losses and the
optimizer steps it took to --result."""

import argparse
import json
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sleep-ms", type=float, default=0)
parser.add_argument("--result", required=True)
args = parser.parse_args()

torch.manual_seed(args.seed)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
loss_fn = nn.MSELoss()
x = torch.randn(256, 16)
y = x.sum(dim=1, keepdim=True)

losses = []
steps = 0
for step in range(args.steps):
    batch = torch.randint(0, 256, (32,))
    optimizer.zero_grad()
    loss = loss_fn(model(x[batch]), y[batch])
    loss.backward()
    optimizer.step()
    scheduler.step()
    steps += 1
    losses.append(loss.item())
    if args.sleep_ms:
        time.sleep(args.sleep_ms / 1000)

with open(args.result, "w") as f:
    json.dump({"steps": steps, "rounds": steps, "losses": losses}, f)
