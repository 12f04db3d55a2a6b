"""A small GAN on 2-D points, generator and discriminator each wrapped in DDP."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def mlp(inp, out):
    return nn.Sequential(nn.Linear(inp, 32), nn.LeakyReLU(0.2), nn.Linear(32, out))


def real_points(gen, n=64):
    angle = torch.rand(n, generator=gen) * 6.2832
    return torch.stack([angle.cos(), angle.sin()], dim=1) * 2.0


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    netG, netD = DDP(mlp(8, 2)), DDP(mlp(2, 1))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(rank)
    for step in range(40):
        real = real_points(gen)
        noise = torch.randn(64, 8, generator=gen)
        fake = netG(noise)
        # discriminator step
        optD.zero_grad()
        out_fake = netD(fake)
        lossD = bce(netD(real), torch.ones(64, 1)) + bce(out_fake, torch.zeros(64, 1))
        lossD.backward()
        optD.step()
        # generator step reuses the discriminator's output on the fakes
        optG.zero_grad()
        lossG = bce(out_fake, torch.ones(64, 1))
        lossG.backward()
        optG.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} lossD {lossD.item():.3f} lossG {lossG.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
