#!/usr/bin/python3
"""The job bench_packing runs in pairs: an ordinary PyTorch training loop (a small
CNN on synthetic 32x32 images, batch 32), unmodified but for
gandiva.torch.attach(optimizer), with torch's default thread settings: what a
user runs. Trains until killed."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import gandiva.torch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gandiva.torch.attach(optimizer)
    while True:
        images, labels = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()  # the boundary


if __name__ == "__main__":
    sys.exit(main())
