"""A PyTorch program with no optimizer (inference over a model for a while):
nothing marks an iteration boundary in it. No gandiva in it."""

import argparse
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--until-file", required=True, help="runs until this file exists")
args = parser.parse_args()

model = nn.Linear(32, 32)
deadline = time.monotonic() + 900  # a loaded machine: the test stops it long before
with torch.no_grad():
    while time.monotonic() < deadline:
        model(torch.randn(8, 32))
        try:
            open(args.until_file).close()
            break
        except FileNotFoundError:
            time.sleep(0.05)
