"""A tiny GAN, as people write one: a discriminator and a generator, each with
its own Adam optimizer, both stepped once per iteration. No gandiva in it."""

import argparse
import json

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=30)
parser.add_argument("--result", required=True)
args = parser.parse_args()

torch.manual_seed(1)
latent = 8
generator = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, 2))
discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()

d_losses, g_losses, steps = [], [], 0
for it in range(args.iterations):
    real = torch.randn(64, 2) * 0.5 + torch.tensor([2.0, -1.0])
    noise = torch.randn(64, latent)
    fake = generator(noise)

    # Discriminator step
    opt_d.zero_grad()
    d_loss = (criterion(discriminator(real), torch.ones(64, 1)) +
              criterion(discriminator(fake.detach()), torch.zeros(64, 1)))
    d_loss.backward()
    opt_d.step()
    steps += 1

    # Generator step
    opt_g.zero_grad()
    g_loss = criterion(discriminator(fake), torch.ones(64, 1))
    g_loss.backward()
    opt_g.step()
    steps += 1

    d_losses.append(d_loss.item())
    g_losses.append(g_loss.item())

with open(args.result, "w") as f:
    json.dump({"steps": steps, "rounds": args.iterations, "losses": g_losses,
               "d_losses": d_losses}, f)
