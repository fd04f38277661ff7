"""GPU suite job: a small CNN trained on synthetic images, deterministically, so
that two runs (alone, time-sliced, swapped, restored, migrated) give bitwise-equal
loss histories. `loss.item()` every iteration (the host sync the shim takes as the
iteration boundary when the job is unmodified).

  train.py --out FILE [--device cuda|cpu] [--iterations N] [--register]
           [--ballast-mib M] [--width W] [--batch B]

--register: gandiva.torch.register + attach (checkpointable, migratable);
otherwise no gandiva import at all (an unmodified job). --ballast-mib holds M MiB
of live device memory (a swap pair's footprint). Writes JSON to --out: the loss
history (float.hex), start-up time (process start to the end of the first
iteration), per-iteration times, peak memory reserved by torch's allocator.
"""
import argparse
import json
import os
import time

T0 = time.monotonic()
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch  # noqa: E402


def model_for(width):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
        # 32x32 -> 4x4 (AdaptiveAvgPool2d has no deterministic CUDA backward in torch 2.x)
        torch.nn.AvgPool2d(8), torch.nn.Flatten(),
        torch.nn.Linear(width * 16, 10))


def batch(iteration, size, device):
    # Made from the iteration number alone: identical after a restore or a migration.
    g = torch.Generator().manual_seed(1000 + iteration)
    x = torch.randn(size, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (size,), generator=g)
    return x.to(device), y.to(device)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--register", action="store_true")
    p.add_argument("--ballast-mib", type=int, default=0)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    device = torch.device(a.device)
    model = model_for(a.width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ballast = None
    if a.ballast_mib:
        ballast = torch.full((a.ballast_mib << 18,), 1.5, device=device)  # float32 words
    losses, times = [], []
    if a.register:
        import gandiva.torch
        state = gandiva.torch.register(model, opt, extra={"losses": losses})
        gandiva.torch.attach(opt)  # a restoring process loads the state here
        losses = state.extra["losses"]
        done = lambda: state.iteration  # noqa: E731
    else:
        done = lambda: len(losses)  # noqa: E731
    first_end = None
    while done() < a.iterations:
        t = time.monotonic()
        x, y = batch(done(), a.batch, device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        value = loss.item()
        losses.append(value)  # before the step: a boundary after it checkpoints it
        opt.step()
        now = time.monotonic()
        times.append(now - t)
        if first_end is None:
            first_end = now
    if ballast is not None:
        assert bool((ballast == 1.5).all()), "ballast changed"
    peak = torch.cuda.max_memory_reserved() if device.type == "cuda" else 0
    with open(a.out, "w") as f:
        json.dump({"losses": [float(v).hex() for v in losses], "startup_s": (first_end or T0) - T0,
                   "iter_s": times, "peak_reserved": peak, "pid": os.getpid()}, f)


if __name__ == "__main__":
    main()
