"""Train a small MLP regressor with DDP; the script checks at the end that training lowered the loss."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def loader(rank, steps=60, batch=64):
    gen = torch.Generator().manual_seed(rank)
    w = torch.linspace(-1, 1, 16).unsqueeze(1)
    for _ in range(steps):
        x = torch.randn(batch, 16, generator=gen)
        yield x, x @ w + 0.05 * torch.randn(batch, 1, generator=gen)


def mean_over_ranks(v):
    t = torch.tensor([v])
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    losses = []
    opt.zero_grad()
    for step, (x, y) in enumerate(loader(rank)):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first = mean_over_ranks(sum(losses[:5]) / 5)
    last = mean_over_ranks(sum(losses[-5:]) / 5)
    if rank == 0:
        print(f"loss first 5 steps {first:.4f}, last 5 steps {last:.4f}", flush=True)
    dist.destroy_process_group()
    if not last < 0.5 * first:
        raise SystemExit(f"training check failed: mean loss went from {first:.4g} (first 5 steps) "
                         f"to {last:.4g} (last 5 steps)")


if __name__ == "__main__":
    main()
