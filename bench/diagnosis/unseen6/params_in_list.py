"""Residual MLP regressor trained with DDP; the final check compares the replicas' predictions on a probe batch."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class ResidualMLP(nn.Module):
    def __init__(self, dim=32, depth=3):
        super().__init__()
        self.inp = nn.Linear(8, dim)
        self.blocks = [nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU()) for _ in range(depth)]
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h).squeeze(-1)


def batches(rank, steps=60, batch=64):
    g = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        x = torch.randn(batch, 8, generator=g)
        yield x, (x ** 2).sum(1).sqrt()


def replicas_agree(model):
    probe = torch.linspace(-1, 1, 64).view(8, 8)
    with torch.no_grad():
        pred = model(probe)
    preds = [torch.empty_like(pred) for _ in range(dist.get_world_size())]
    dist.all_gather(preds, pred)
    return max((p - preds[0]).abs().max().item() for p in preds)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    model = DDP(ResidualMLP())                  # DDP broadcasts rank 0's initial weights
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for step, (x, y) in enumerate(batches(rank)):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    diff = replicas_agree(model)
    if diff > 1e-5:
        raise RuntimeError(f"replicas predict differently on the probe batch (max difference {diff:.4f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
