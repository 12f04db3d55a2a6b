import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def batches(rank, steps, bs, dim, seed=0):
    g = torch.Generator().manual_seed(seed + rank)
    for _ in range(steps):
        x = torch.randn(bs, dim, generator=g)
        y = torch.randint(0, 10, (bs,), generator=g)
        yield x, y


class CondDenoiser(nn.Module):
    def __init__(self, dim=32, n_classes=10, emb=16, batch=16, p_uncond=0.1, T=100):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, T)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0))
        self.label_emb = nn.Embedding(n_classes, emb)
        self.register_buffer("null_emb", torch.zeros(1, emb).expand(batch, emb))
        self.p_uncond = p_uncond
        self.net = nn.Sequential(nn.Linear(dim + emb + 1, 128), nn.SiLU(), nn.Linear(128, dim))

    def forward(self, x0, t, y, noise):
        ab = self.alphas_cumprod[t].unsqueeze(1)
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        c = self.label_emb(y)
        drop = (torch.rand(c.shape[0], 1) < self.p_uncond).float()
        c = drop * self.null_emb[: c.shape[0]] + (1 - drop) * c
        h = torch.cat([xt, c, t.float().unsqueeze(1) / 100], dim=1)
        return F.mse_loss(self.net(h), noise)

def train(model, rank, world, steps=20):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (x0, y) in enumerate(batches(rank, steps, 16, 32)):
        t = torch.randint(0, 100, (x0.shape[0],))
        noise = torch.randn_like(x0)
        loss = model(x0, t, y, noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


def main():
    rank, world = setup()
    torch.manual_seed(0)
    model = CondDenoiser()
    if world > 1:
        model = DDP(model)
    train(model, rank, world)


if __name__ == "__main__":
    main()
