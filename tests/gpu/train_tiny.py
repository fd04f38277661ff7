"""GPU test job: a small unmodified PyTorch training loop (no gandiva calls).

The loss is read back every iteration (.item()), the host-blocking sync the shim
takes as the iteration boundary. Usage: train_tiny.py ITERATIONS
"""
import sys

import torch


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    for _ in range(iterations):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()


if __name__ == "__main__":
    main()
