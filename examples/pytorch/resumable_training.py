#!/usr/bin/env python3
"""An ordinary PyTorch epoch loop, made restorable with three gandiva lines.

A shuffling DataLoader with worker processes, SGD with momentum, a StepLR
schedule, a GradScaler (disabled on CPU, registered all the same), dropout, and
an EMA of the weights (torch.optim.swa_utils.AveragedModel). The gandiva lines
are marked `# gandiva`; without them this is the script people write:

    gandiva run -- /usr/bin/python3 examples/pytorch/resumable_training.py --epochs 4

Checkpointed (`gandiva checkpoint`, or here --checkpoint-at N), restored
(`gandiva run --restore DIR`) or migrated (`gandiva migrate`) at any
iteration, it continues at the next batch of the same epoch and ends with the
same losses and weights, bit for bit, as a run never interrupted.
"""

import argparse
import hashlib
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel
from torch.utils.data import DataLoader, TensorDataset

import gandiva
import gandiva.torch


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.drop = nn.Dropout(0.2)  # draws from torch's global RNG every step
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(self.drop(x.flatten(1)))


def synthetic_dataset(samples, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = torch.randn(samples, 1, 16, 16, generator=g)
    images[torch.arange(samples), 0, labels, labels] += 3.0  # learnable: a bright pixel per class
    return TensorDataset(images, labels)


def digest(*modules):
    h = hashlib.sha256()
    for m in modules:
        for t in m.state_dict().values():
            h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--samples", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schedule", choices=["epoch", "step"], default="epoch",
                    help="step the LR scheduler once per epoch or after every batch")
    ap.add_argument("--result", help="write the loss history and a weight digest here (JSON)")
    ap.add_argument("--checkpoint-at", type=int, default=0,
                    help="write a checkpoint after this many iterations (needs --checkpoint-dir)")
    ap.add_argument("--checkpoint-dir")
    ap.add_argument("--exit-after-checkpoint", action="store_true",
                    help="stop right after --checkpoint-at, as a job killed there would")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    model = Net()
    ema = AveragedModel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2 if args.schedule == "epoch"
                                                else 25, gamma=0.5)
    scaler = torch.cuda.amp.GradScaler(enabled=False)  # the model is on the CPU here
    loader = DataLoader(synthetic_dataset(args.samples, args.seed), batch_size=args.batch,
                        shuffle=True, num_workers=args.workers)
    losses = []

    loader = gandiva.torch.resumable(loader)  # gandiva
    state = gandiva.torch.register(model, optimizer, scheduler, scaler, ema, loader,  # gandiva
                                   extra={"losses": losses, "resumed_at": None})
    gandiva.torch.attach(loader)  # gandiva: a restoring process loads everything here
    losses = state.extra["losses"]  # restored in place: the same list, refilled
    if state.restored:
        state.extra["resumed_at"] = [loader.epoch, loader.position]

    for epoch in loader.epochs(args.epochs):  # gandiva: instead of range(args.epochs)
        model.train()
        for images, labels in loader:  # from the next batch after a restore
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            scaler.scale(loss).backward()
            losses.append(loss.item())
            scaler.step(optimizer)
            scaler.update()
            ema.update_parameters(model)
            if args.schedule == "step":
                scheduler.step()
            # The body is done (the loader marks the boundary as it hands out the next
            # batch): the job may checkpoint itself here, as gandiva would there.
            if args.checkpoint_at and state.iteration == args.checkpoint_at:
                gandiva.checkpoint(args.checkpoint_dir)
                if args.exit_after_checkpoint:
                    return
        if args.schedule == "epoch":
            scheduler.step()

    if args.result:
        with open(args.result, "w") as f:
            json.dump({"losses": losses, "iterations": state.iteration,
                       "weights_sha256": digest(model, ema),
                       "lr": scheduler.get_last_lr(), "resumed_at": state.extra["resumed_at"]}, f)


if __name__ == "__main__":
    main()
