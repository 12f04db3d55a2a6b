"""A script for two terminals (one process per machine): reads MASTER_ADDR/MASTER_PORT, NODE_RANK, NNODES.
Trains a tiny regression model and prints a progress report per epoch."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def report(rank, epoch, losses):
    mean = sum(losses) / len(losses)
    spread = (sum((l - mean) ** 2 for l in losses) / len(losses)) ** 0.5
    print(f"[rank {rank}] epoch {epoch} \u2192 loss {mean:.4f} \u00b1 {spread:.4f}", flush=True)


def main():
    rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(4):
        losses = []
        for _ in range(25):
            x = torch.randn(32, 6, generator=g)
            loss = nn.functional.mse_loss(model(x), torch.sin(x[:, :1]) + x[:, 1:2])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        report(rank, epoch, losses)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
