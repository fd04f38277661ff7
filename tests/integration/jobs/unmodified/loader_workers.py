"""An epoch loop over a DataLoader with 2 worker processes, as people write it:
a small CNN on synthetic images, shuffled batches, SGD. No gandiva in it."""

import argparse
import json

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--result", required=True)
args = parser.parse_args()

torch.manual_seed(3)
images = torch.randn(160, 1, 12, 12)
labels = torch.randint(0, 3, (160,))
loader = DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True, num_workers=2)
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 10 * 10, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()

losses, steps = [], 0
for epoch in range(args.epochs):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        steps += 1
        losses.append(loss.item())

with open(args.result, "w") as f:
    json.dump({"steps": steps, "rounds": steps, "losses": losses}, f)
