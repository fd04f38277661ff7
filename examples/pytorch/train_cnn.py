#!/usr/bin/env python3
"""A small, seeded PyTorch CNN trained on synthetic images, on CPU.

Marks a gandiva iteration boundary after every optimizer step, so under
`gandiva run` the node controller can time-slice it exactly between iterations:

    gandiva run --name cnn -- /usr/bin/python3 examples/pytorch/train_cnn.py --iterations 300

Without gandiva it trains the same way (the boundary calls cost nothing).

Restorable: model, optimizer, RNGs, the iteration counter and the loss history
are registered with gandiva, so a run checkpointed at any boundary (by the
controller, or here with --checkpoint-at N --checkpoint-dir D) continues
bitwise identically in a new process started with GANDIVA_RESTORE=D.
"""

import argparse
import hashlib
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import gandiva
    import gandiva.torch
except ImportError:  # runs without gandiva installed, too
    gandiva = None


class SmallCnn(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def synthetic_batch(generator, batch, classes=10):
    """Images whose class is encoded in where a bright square sits, plus noise."""
    labels = torch.randint(0, classes, (batch,), generator=generator)
    images = torch.randn(batch, 1, 28, 28, generator=generator)
    for i, label in enumerate(labels.tolist()):
        r, c = divmod(label, 4)
        images[i, 0, 2 + r * 7 : 7 + r * 7, 2 + c * 6 : 7 + c * 6] += 0.4
    return images, labels


class _LocalState:
    """Stands in for gandiva.torch's TrainingState when gandiva is not installed."""

    def __init__(self):
        self.iteration = 0
        self.extra = {"losses": []}


def parameters_digest(model):
    h = hashlib.sha256()
    for p in model.state_dict().values():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (default: torch's own choice)")
    ap.add_argument("--report-every", type=int, default=50)
    ap.add_argument("--result", help="write losses and a parameter digest here (JSON)")
    ap.add_argument("--checkpoint-at", type=int, default=0,
                    help="write a checkpoint after this iteration (needs --checkpoint-dir)")
    ap.add_argument("--checkpoint-dir", help="where --checkpoint-at writes state.gdck")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    model = SmallCnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if gandiva is not None:
        # Registered before attach(): a GANDIVA_RESTORE run loads it at attach()'s boundary.
        state = gandiva.torch.register(model, optimizer, generators=[generator],
                                       extra={"losses": []})
        gandiva.torch.attach(optimizer)
    else:
        state = _LocalState()
    restored_at = state.iteration

    start = time.monotonic()
    while state.iteration < args.iterations:
        images, labels = synthetic_batch(generator, args.batch)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        state.extra["losses"].append(loss.item())
        optimizer.step()  # gandiva counts the iteration and marks the boundary here
        if gandiva is None:
            state.iteration += 1
        it = state.iteration
        if args.checkpoint_at and it == args.checkpoint_at and gandiva is not None:
            gandiva.checkpoint(args.checkpoint_dir)
            print(f"[cnn] checkpoint at iteration {it} in {args.checkpoint_dir}", flush=True)
        if args.report_every and it % args.report_every == 0:
            s = gandiva.stats() if gandiva else {}
            print(f"[cnn] iter {it:5d} loss {loss.item():.4f} "
                  f"iter_ms ewma {s.get('ewma_ms', 0):.2f} p99 {s.get('p99_ms', 0):.2f} "
                  f"parks {s.get('parks', 0)}", flush=True)
    elapsed = time.monotonic() - start
    losses = state.extra["losses"]
    result = {"iterations": args.iterations, "elapsed_s": elapsed, "losses": losses,
              "restored_at_iteration": restored_at,
              "start_monotonic_s": start, "end_monotonic_s": start + elapsed,
              "parameters_sha256": parameters_digest(model)}
    if args.result:
        with open(args.result, "w") as f:
            json.dump(result, f)
    print(f"[cnn] done: {args.iterations} iterations in {elapsed:.2f} s, final loss {losses[-1]:.4f}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
