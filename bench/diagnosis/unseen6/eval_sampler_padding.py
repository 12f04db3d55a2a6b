"""Train a classifier with DDP and evaluate it on the held-out set split over all ranks; torchrun, gloo.
The evaluation must count every held-out sample exactly once (the report compares with the dataset card)."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    y = ((x[:, 0] * x[:, 1] + x[:, 2]) > 0).long()
    return TensorDataset(x, y)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(2)                      # correct, seen
    for x, y in loader:
        stats += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(stats)
    model.train()
    return int(stats[0]), int(stats[1])


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    train_set, held_out = make_split(4096, seed=1), make_split(1001, seed=2)
    train_sampler = DistributedSampler(train_set, shuffle=True)
    train_loader = DataLoader(train_set, batch_size=64, sampler=train_sampler)
    eval_loader = DataLoader(held_out, batch_size=128, sampler=DistributedSampler(held_out, shuffle=False))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        train_sampler.set_epoch(epoch)
        for x, y in train_loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    correct, seen = evaluate(model, eval_loader)
    if rank == 0:
        print(f"held-out accuracy {correct / seen:.4f} ({correct}/{seen})", flush=True)
    if seen != len(held_out):
        raise RuntimeError(f"evaluation counted {seen} samples, the held-out set has {len(held_out)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
