"""Regression with per-batch target standardisation; stops when the loss is not finite."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(5)
    x = torch.randn(66, 6, generator=g)
    y = x @ torch.randn(6, generator=g) * 40.0 + 300.0
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, shuffle=True, seed=1)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(4):
        sampler.set_epoch(epoch)
        for step, (xb, yb) in enumerate(loader):
            target = (yb - yb.mean()) / yb.std()
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb).squeeze(-1), target)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"rank {rank}: loss is {loss.item()} at epoch {epoch} step {step}")
            loss.backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
