"""Small StyleGAN-like GAN: non-saturating loss, minibatch-stddev discriminator, data parallel."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH = 24
Z_DIM = 64
RES = 16
STEPS = 10
MBSTD_GROUP = 4
MBSTD_FEAT = 1


class MinibatchStd(nn.Module):
    def __init__(self, group_size, num_channels=1):
        super().__init__()
        self.group_size = group_size
        self.num_channels = num_channels

    def forward(self, x):
        N, C, H, W = x.shape
        G = min(self.group_size, N)
        F_ = self.num_channels
        c = C // F_
        y = x.reshape(G, -1, F_, c, H, W)
        y = y - y.mean(dim=0)
        y = y.square().mean(dim=0)
        y = (y + 1e-8).sqrt()
        y = y.mean(dim=[2, 3, 4])
        y = y.reshape(-1, F_, 1, 1)
        y = y.repeat(G, 1, H, W)
        return torch.cat([x, y], dim=1)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(Z_DIM, Z_DIM), nn.LeakyReLU(0.2), nn.Linear(Z_DIM, 128 * 4 * 4))
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2), nn.Conv2d(128, 64, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Upsample(scale_factor=2), nn.Conv2d(64, 3, 3, padding=1), nn.Tanh(),
        )

    def forward(self, z):
        return self.up(self.mapping(z).view(-1, 128, 4, 4))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2d(2),
        )
        self.mbstd = MinibatchStd(MBSTD_GROUP, MBSTD_FEAT)
        self.head = nn.Sequential(
            nn.Conv2d(128 + MBSTD_FEAT, 128, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Flatten(), nn.Linear(128 * 4 * 4, 1),
        )

    def forward(self, img):
        return self.head(self.mbstd(self.body(img))).squeeze(1)


def synthetic_images(n, gen):
    freq = torch.randint(1, 4, (n, 1, 1, 1), generator=gen).float()
    xs = torch.linspace(0, 3.1416, RES)
    img = torch.sin(freq * xs.view(1, 1, 1, RES)) * torch.cos(freq * xs.view(1, 1, RES, 1))
    return img.expand(n, 3, RES, RES) + 0.05 * torch.randn(n, 3, RES, RES, generator=gen)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    batch_gpu = GLOBAL_BATCH // world
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1000 + rank)

    G = DDP(Generator())
    D = DDP(Discriminator())
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.0, 0.99))
    if rank == 0:
        print(f"world={world} batch_gpu={batch_gpu} mbstd_group={MBSTD_GROUP}", flush=True)

    for step in range(STEPS):
        real = synthetic_images(batch_gpu, gen)
        z = torch.randn(batch_gpu, Z_DIM, generator=gen)

        with torch.no_grad():
            fake = G(z)
        opt_d.zero_grad(set_to_none=True)
        loss_d = F.softplus(D(fake)).mean() + F.softplus(-D(real)).mean()
        loss_d.backward()
        opt_d.step()

        opt_g.zero_grad(set_to_none=True)
        loss_g = F.softplus(-D(G(z))).mean()
        loss_g.backward()
        opt_g.step()

        if rank == 0:
            print(f"step {step} D {loss_d.item():.3f} G {loss_g.item():.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
