"""Train a regressor with DDP and report the epoch's mean loss across ranks."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def mean_over_ranks(value):
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value / dist.get_world_size()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    w = torch.randn(10, 1)
    for epoch in range(3):
        running = 0.0
        for step in range(25):
            x = torch.randn(32, 10, generator=gen)
            loss = nn.functional.mse_loss(model(x), x @ w)
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item()
        epoch_loss = mean_over_ranks(running / 25)
        if rank == 0:
            print(f"epoch {epoch} mean loss {epoch_loss:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
