"""DCGAN trainer on synthetic 16x16 images, data parallel over all ranks."""
import datetime
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

Z_DIM = 32
IMG = 16
BATCH = 16
STEPS = 20
N_SAMPLES = 9


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(Z_DIM, 64 * 4 * 4)
        self.net = nn.Sequential(
            nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Tanh(),
        )

    def forward(self, z):
        return self.net(self.fc(z).view(-1, 64, 4, 4))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(32, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2),
            nn.Flatten(), nn.Linear(64 * 4 * 4, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(1)


def real_batch(gen, n):
    base = torch.linspace(-1, 1, IMG)
    grid = base.view(1, 1, IMG, 1) * base.view(1, 1, 1, IMG)
    phase = torch.rand(n, 3, 1, 1, generator=gen) * 2 - 1
    return torch.tanh(grid * 3 * phase + 0.1 * torch.randn(n, 3, IMG, IMG, generator=gen))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234 + rank)
    data_gen = torch.Generator().manual_seed(99 + rank)

    G = DDP(Generator())
    D = DDP(Discriminator())
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    ones = torch.ones(BATCH)
    zeros = torch.zeros(BATCH)

    t0 = time.time()
    for step in range(STEPS):
        real = real_batch(data_gen, BATCH)
        z = torch.randn(BATCH, Z_DIM)
        fake = G(z)

        opt_d.zero_grad(set_to_none=True)
        d_real = D(real)
        d_fake = D(fake.detach())
        loss_d = F.binary_cross_entropy_with_logits(d_real, ones) + \
            F.binary_cross_entropy_with_logits(d_fake, zeros)
        loss_d.backward()
        opt_d.step()

        opt_g.zero_grad(set_to_none=True)
        loss_g = F.binary_cross_entropy_with_logits(D(fake), ones)
        loss_g.backward()
        opt_g.step()

        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f}", flush=True)

    G.eval()
    per_rank = N_SAMPLES // world
    sample_gen = torch.Generator().manual_seed(7 + rank)
    with torch.no_grad():
        local = G.module(torch.randn(per_rank, Z_DIM, generator=sample_gen)).clamp(-1, 1)
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)

    if rank == 0:
        imgs = torch.cat(gathered)
        nrow = int(N_SAMPLES ** 0.5)
        grid = imgs.view(nrow, nrow, 3, IMG, IMG).permute(2, 0, 3, 1, 4).reshape(3, nrow * IMG, nrow * IMG)
        grid = ((grid + 1) * 127.5).round().to(torch.uint8).numpy()
        np.save("dcgan_grid.npy", grid)
        print(f"done in {time.time() - t0:.1f}s on {world} ranks, grid {grid.shape}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
