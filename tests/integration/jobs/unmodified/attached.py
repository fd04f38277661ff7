"""A script that marks its own boundaries (gandiva.torch.attach): the automatic
hook must not count its steps a second time."""

import argparse
import json

import gandiva.torch
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--result", required=True)
args = parser.parse_args()

torch.manual_seed(4)
model = nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
gandiva.torch.attach(optimizer)
for _ in range(args.steps):
    optimizer.zero_grad()
    model(torch.randn(4, 8)).pow(2).mean().backward()
    optimizer.step()

with open(args.result, "w") as f:
    json.dump({"steps": args.steps, "rounds": args.steps}, f)
