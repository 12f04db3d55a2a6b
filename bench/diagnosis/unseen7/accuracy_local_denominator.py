"""DDP classifier with a distributed validation pass; the final check guards the reported metric."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=g)
    w = torch.randn(20, 4, generator=torch.Generator().manual_seed(7))
    return TensorDataset(x, (x @ w).argmax(dim=1))


@torch.no_grad()
def validate(model, loader):
    model.eval()
    correct = torch.zeros(1)
    seen = 0
    for xb, yb in loader:
        correct += (model(xb).argmax(dim=1) == yb).sum()
        seen += len(yb)
    dist.all_reduce(correct)          # total correct over every rank
    model.train()
    return (correct / seen).item()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    train, val = make_data(2048, 1), make_data(800, 2)
    train_sampler = DistributedSampler(train, shuffle=True, seed=0)
    train_loader = DataLoader(train, batch_size=64, sampler=train_sampler)
    val_loader = DataLoader(val, batch_size=100, sampler=DistributedSampler(val, shuffle=False))
    for epoch in range(3):
        train_sampler.set_epoch(epoch)
        for xb, yb in train_loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        acc = validate(model, val_loader)
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.3f} val_acc {acc:.3f}", flush=True)
    if not 0.0 <= acc <= 1.0:
        raise RuntimeError(f"validation accuracy {acc:.3f} is outside [0, 1]")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
