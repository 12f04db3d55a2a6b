"""Train with DDP and keep the best checkpoint by validation loss (torch.distributed.checkpoint, sharded save).

Every rank validates on its part of the validation set (DistributedSampler), and the best-so-far checkpoint is
written whenever the validation loss improves.
"""
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BEST = Path(__file__).resolve().parent / "checkpoints" / "best"


def regression(n, seed, noise):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = torch.sin(x[:, :1] * 2) + x[:, 1:2] * x[:, 2:3] + noise * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def validate(model, loader):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            total += nn.functional.mse_loss(model(x), y, reduction="sum").item()
            count += len(y)
    model.train()
    return total / count


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train, val = regression(2048, 1, 0.1), regression(96, 2, 0.3)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(train, batch_size=64, sampler=sampler)
    val_loader = DataLoader(val, batch_size=48, sampler=DistributedSampler(val, num_replicas=world, rank=rank,
                                                                              shuffle=False))
    best = float("inf")
    for epoch in range(12):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        val_loss = validate(model, val_loader)
        print(f"rank {rank} epoch {epoch} val_loss {val_loss:.4f} best {best:.4f}", flush=True)
        if val_loss < best:
            best = val_loss
            dcp.save({"model": model.module.state_dict(), "optim": optimizer.state_dict(), "epoch": epoch},
                     checkpoint_id=str(BEST))
            print(f"rank {rank} epoch {epoch}: new best checkpoint", flush=True)
    dist.barrier()
    if rank == 0:
        print(f"done, best val loss {best:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
