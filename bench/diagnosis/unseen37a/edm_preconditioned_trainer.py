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


class FourierEmbedding(nn.Module):
    def __init__(self, n=8, scale=16.0):
        super().__init__()
        with torch.inference_mode():
            freqs = torch.randn(n, generator=torch.Generator().manual_seed(1)) * scale
        self.register_buffer("freqs", freqs)

    def forward(self, sigma):
        x = torch.log(sigma).unsqueeze(1) / 4 * self.freqs * 2 * torch.pi
        return torch.cat([x.cos(), x.sin()], dim=1)


class EDMDenoiser(nn.Module):
    def __init__(self, dim=32, sigma_data=0.5):
        super().__init__()
        self.sigma_data = sigma_data
        self.emb = FourierEmbedding()
        self.label_emb = nn.Embedding(10, 16)
        self.net = nn.Sequential(nn.Linear(dim + 32, 128), nn.SiLU(), nn.Linear(128, dim))

    def forward(self, x0, t, y, noise):
        sigma = torch.exp(t.float() / 100 * 2.4 - 1.2)
        s = sigma.unsqueeze(1)
        sd = self.sigma_data
        c_in = 1 / (s**2 + sd**2).sqrt()
        c_skip = sd**2 / (s**2 + sd**2)
        c_out = s * sd / (s**2 + sd**2).sqrt()
        xn = x0 + s * noise
        h = torch.cat([c_in * xn, self.emb(sigma), self.label_emb(y)], dim=1)
        d = c_skip * xn + c_out * self.net(h)
        w = (s**2 + sd**2) / (s * sd) ** 2
        return (w * (d - x0) ** 2).mean()

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
    model = EDMDenoiser()
    if world > 1:
        model = DDP(model)
    train(model, rank, world)


if __name__ == "__main__":
    main()
