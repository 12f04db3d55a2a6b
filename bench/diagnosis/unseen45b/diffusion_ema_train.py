"""DDPM on 8x8 synthetic images with an EMA copy of the denoiser; samples are drawn by all ranks."""
import copy
import datetime
import math
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

T = 100
RES = 8
BATCH = 32
STEPS = 30
N_SAMPLES = 16
EMA_DECAY = 0.995


class Denoiser(nn.Module):
    def __init__(self, dim=RES * RES, hidden=256):
        super().__init__()
        self.t_embed = nn.Embedding(T, hidden)
        self.inp = nn.Linear(dim, hidden)
        self.mid = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def forward(self, x, t):
        h = self.inp(x.flatten(1)) + self.t_embed(t)
        return self.mid(h).view_as(x)


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.module = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for e, p in zip(self.module.parameters(), model.parameters()):
            e.lerp_(p, 1.0 - self.decay)


def linear_schedule():
    betas = torch.linspace(1e-4, 0.05, T)
    alphas = 1.0 - betas
    return betas, alphas, torch.cumprod(alphas, dim=0)


def toy_images(n, gen):
    angle = torch.rand(n, 1, 1, generator=gen) * math.pi
    xs = torch.linspace(-1, 1, RES)
    yy, xx = torch.meshgrid(xs, xs, indexing="ij")
    return torch.tanh(4 * (torch.cos(angle) * xx + torch.sin(angle) * yy)).unsqueeze(1)


@torch.no_grad()
def ddpm_sample(net, n, sched, gen):
    betas, alphas, abar = sched
    x = torch.randn(n, 1, RES, RES, generator=gen)
    for t in reversed(range(T)):
        tt = torch.full((n,), t, dtype=torch.long)
        eps = net(x, tt)
        x = (x - betas[t] / torch.sqrt(1 - abar[t]) * eps) / torch.sqrt(alphas[t])
        if t > 0:
            x = x + torch.sqrt(betas[t]) * torch.randn(x.shape, generator=gen)
    return x.clamp(-1, 1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(500 + rank)
    sched = linear_schedule()
    abar = sched[2]

    model = DDP(Denoiser())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ema = EMA(model.module, EMA_DECAY) if is_main else None

    for step in range(STEPS):
        x0 = toy_images(BATCH, gen)
        t = torch.randint(0, T, (BATCH,), generator=gen)
        noise = torch.randn(x0.shape, generator=gen)
        a = abar[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if is_main:
            ema.update(model.module)
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)

    per_rank = N_SAMPLES // world
    samples = ddpm_sample(ema.module, per_rank, sched, gen)
    parts = [torch.empty_like(samples) for _ in range(world)]
    dist.all_gather(parts, samples)
    if is_main:
        grid = torch.cat(parts).view(4, 4, RES, RES).permute(0, 2, 1, 3).reshape(4 * RES, 4 * RES)
        np.save("ema_samples.npy", ((grid + 1) * 127.5).to(torch.uint8).numpy())
        print("saved ema_samples.npy", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
