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


def latent_stats(dim, tokens=4):
    mean = np.linspace(-0.1, 0.1, dim, dtype=np.float32)
    std = np.full(dim, 0.18215, dtype=np.float32)
    return np.broadcast_to(mean, (tokens, dim)), np.broadcast_to(std, (tokens, dim))


class LatentDenoiser(nn.Module):
    def __init__(self, dim=8, tokens=4, T=100):
        super().__init__()
        mean, std = latent_stats(dim, tokens)
        betas = torch.linspace(1e-4, 0.02, T)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0))
        self.register_buffer("lat_mean", torch.from_numpy(mean))
        self.register_buffer("lat_std", torch.from_numpy(std))
        self.label_emb = nn.Embedding(10, 16)
        self.net = nn.Sequential(nn.Linear(tokens * dim + 17, 128), nn.SiLU(), nn.Linear(128, tokens * dim))

    def forward(self, x0, t, y, noise):
        z = ((x0.view(-1, *self.lat_mean.shape) - self.lat_mean) / self.lat_std).flatten(1)
        ab = self.alphas_cumprod[t].unsqueeze(1)
        zt = ab.sqrt() * z + (1 - ab).sqrt() * noise
        h = torch.cat([zt, self.label_emb(y), t.float().unsqueeze(1) / 100], dim=1)
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
    model = LatentDenoiser()
    if world > 1:
        model = DDP(model)
    train(model, rank, world)


if __name__ == "__main__":
    main()
