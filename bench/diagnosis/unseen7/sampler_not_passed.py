"""DDP training loop with a DistributedSampler; the epoch bookkeeping checks how many samples were used."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Indexed(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(5)
        self.x = torch.randn(n, 8, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return i, self.x[i]


def build_loader(ds, batch_size):
    sampler = DistributedSampler(ds, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=batch_size, shuffle=True, drop_last=False)
    return loader, sampler


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = Indexed(1024)
    loader, sampler = build_loader(ds, 64)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen = torch.zeros(len(ds))
        for idx, xb in loader:
            loss = (model(xb) - xb).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen[idx] += 1
        dist.all_reduce(seen)
        used, dup = int(seen.sum()), int((seen > 1).sum())
        print(f"rank {rank} epoch {epoch}: loss {loss.item():.4f}, {used} samples used", flush=True)
        if used != len(ds):
            raise RuntimeError(f"epoch {epoch} used {used} samples for a dataset of {len(ds)} "
                               f"({dup} samples used more than once)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
