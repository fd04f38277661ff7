#!/usr/bin/env python3
"""Fine-tuning on a frozen, pretrained embedding table, on CPU.

The common shape of transfer learning: a large pretrained part (here an
embedding table, 64 MiB by default, its weights drawn from a fixed seed where a
real job would load them from a file) that is frozen, and a small head that
trains. Everything is registered with gandiva, the frozen table too, so a
checkpoint holds the whole job. When gandiva migrates the job, the copy it
starts on the destination builds the same frozen table; only the chunks of the
state that training changed (the head, the optimizer, the loss history) cross
the network (docs/migration.md, "Less to send: the warm copy's own state").

    gandiva run --name ft -- /usr/bin/python3 examples/pytorch/finetune_frozen.py --iterations 3000

It needs the gandiva package (`gandiva run` puts the built one on PYTHONPATH);
unmanaged, its boundaries cost nothing.
"""

import argparse
import hashlib
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gandiva
import gandiva.torch


class FrozenEmbeddingClassifier(nn.Module):
    def __init__(self, vocabulary, dim=256, hidden=256, classes=10):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dim)  # "pretrained", frozen below
        self.hidden = nn.Linear(dim, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, tokens):
        features = self.embedding(tokens).mean(dim=1)
        return self.out(F.relu(self.hidden(features)))


def synthetic_batch(generator, batch, vocabulary, length=32, classes=10):
    """Token sequences whose class is which band of the vocabulary they favour."""
    labels = torch.randint(0, classes, (batch,), generator=generator)
    tokens = torch.randint(0, vocabulary, (batch, length), generator=generator)
    band = vocabulary // classes
    favoured = labels[:, None] * band + torch.randint(0, band, (batch, length // 2), generator=generator)
    tokens[:, : length // 2] = favoured
    return tokens, labels


def parameters_digest(model):
    h = hashlib.sha256()
    for p in model.state_dict().values():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--embedding-mib", type=int, default=64, help="size of the frozen table")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report-every", type=int, default=200)
    ap.add_argument("--result", help="write losses and a parameter digest here (JSON)")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    dim = 256
    vocabulary = args.embedding_mib * (1 << 20) // (dim * 4)
    model = FrozenEmbeddingClassifier(vocabulary, dim)
    model.embedding.weight.requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trained, lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(args.seed)
    state = gandiva.torch.register(model, optimizer, generators=[generator], extra={"losses": []})
    gandiva.torch.attach(optimizer)
    restored_at = state.iteration

    start = time.monotonic()
    while state.iteration < args.iterations:
        tokens, labels = synthetic_batch(generator, args.batch, vocabulary)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens), labels)
        loss.backward()
        state.extra["losses"].append(loss.item())
        optimizer.step()  # gandiva counts the iteration and marks the boundary here
        if args.report_every and state.iteration % args.report_every == 0:
            s = gandiva.stats()
            print(f"[finetune] iter {state.iteration:5d} loss {loss.item():.4f} "
                  f"iter_ms ewma {s.get('ewma_ms', 0):.2f}", flush=True)
    elapsed = time.monotonic() - start
    losses = state.extra["losses"]
    result = {"iterations": args.iterations, "elapsed_s": elapsed, "losses": losses,
              "restored_at_iteration": restored_at, "parameters_sha256": parameters_digest(model)}
    if args.result:
        with open(args.result, "w") as f:
            json.dump(result, f)
    print(f"[finetune] done: {args.iterations} iterations in {elapsed:.2f} s, "
          f"final loss {losses[-1]:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
