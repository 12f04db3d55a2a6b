"""Image-feature classifier; 2048 training samples, 96 validation samples.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... val_drop_last_empty.py
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

LOADER = dict(batch_size=64, drop_last=True, num_workers=0)


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    return TensorDataset(x, (x[:, 0] + x[:, 1] > 0).long())


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    train, val = dataset(2048, 0), dataset(96, 1)
    train_sampler = DistributedSampler(train, num_replicas=world, rank=rank)
    train_loader = DataLoader(train, sampler=train_sampler, **LOADER)
    val_loader = DataLoader(val, sampler=DistributedSampler(val, num_replicas=world, rank=rank, shuffle=False),
                            **LOADER)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        train_sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        total, batches = 0.0, 0
        with torch.no_grad():
            for x, y in val_loader:
                total += nn.functional.cross_entropy(model(x), y).item()
                batches += 1
        val_loss = torch.tensor([total / batches])
        dist.all_reduce(val_loss)
        if rank == 0:
            print(f"epoch {epoch}: train {loss.item():.3f} val {val_loss.item() / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
