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


def blur_operator(n, width=2):
    rows, cols, vals = [], [], []
    for i in range(n):
        for j in range(max(0, i - width), min(n, i + width + 1)):
            rows.append(i)
            cols.append(j)
            vals.append(1.0 / (2 * width + 1))
    return torch.sparse_coo_tensor(torch.tensor([rows, cols]), torch.tensor(vals), (n, n)).coalesce()


class BlurDenoiser(nn.Module):
    def __init__(self, dim=32, T=100):
        super().__init__()
        betas = torch.linspace(1e-4, 0.02, T)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0))
        self.register_buffer("blur", blur_operator(dim))
        self.label_emb = nn.Embedding(10, 16)
        self.net = nn.Sequential(nn.Linear(dim + 17, 128), nn.SiLU(), nn.Linear(128, dim))

    def forward(self, x0, t, y, noise):
        ab = self.alphas_cumprod[t].unsqueeze(1)
        blurred = torch.sparse.mm(self.blur, x0.t()).t()
        xt = ab.sqrt() * blurred + (1 - ab).sqrt() * noise
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
    model = BlurDenoiser()
    if world > 1:
        model = DDP(model)
    train(model, rank, world)


if __name__ == "__main__":
    main()
