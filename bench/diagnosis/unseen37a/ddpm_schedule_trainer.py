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


@torch.inference_mode()
def cosine_schedule(T, s=0.008):
    steps = torch.arange(T + 1, dtype=torch.float64) / T
    f = torch.cos((steps + s) / (1 + s) * torch.pi / 2) ** 2
    ab = f / f[0]
    betas = (1 - ab[1:] / ab[:-1]).clamp(max=0.999)
    return betas.float(), torch.cumprod(1 - betas, 0).float()


class Denoiser(nn.Module):
    def __init__(self, dim=32, T=100):
        super().__init__()
        betas, ab = cosine_schedule(T)
        self.register_buffer("betas", betas)
        self.register_buffer("alphas_cumprod", ab)
        self.label_emb = nn.Embedding(10, 16)
        self.net = nn.Sequential(nn.Linear(dim + 17, 128), nn.SiLU(), nn.Linear(128, dim))

    def forward(self, x0, t, y, noise):
        ab = self.alphas_cumprod[t].unsqueeze(1)
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        h = torch.cat([xt, self.label_emb(y), t.float().unsqueeze(1) / 100], dim=1)
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
    model = Denoiser()
    if world > 1:
        model = DDP(model)
    train(model, rank, world)


if __name__ == "__main__":
    main()
