"""Local-SGD style training: each rank takes a few optimizer steps on its own shard, then the replicas are
averaged parameter by parameter (a hand-written model average instead of DDP)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

SYNC_EVERY = 4
STEPS = 24


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))


def shard(rank, n=512):
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g))
    return x, y


def average_parameters(model, world):
    """Average the replicas in place (every rank ends with the same weights)."""
    for p in model.parameters():
        dist.all_reduce(p, op=dist.ReduceOp.SUM)
        p /= world


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = shard(rank)
    for step in range(1, STEPS + 1):
        idx = torch.randint(0, len(x), (32,))
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % SYNC_EVERY == 0:
            average_parameters(model, world)
            print(f"rank {rank} step {step} loss {loss.item():.4f} (replicas averaged)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
