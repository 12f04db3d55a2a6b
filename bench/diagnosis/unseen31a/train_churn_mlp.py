"""Train the churn classifier on tabular features with DDP; each rank reads its partition
of the customer table, min-max scales it and trains a small MLP."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES = ["tenure", "monthly_spend", "support_calls", "is_business", "discount", "devices"]


def init():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def load_partition(rank, world_size, rows_per_rank=2048):
    g = torch.Generator().manual_seed(3)
    n = rows_per_rank * world_size
    x = torch.rand(n, len(FEATURES), generator=g) * torch.tensor([72.0, 120.0, 9.0, 1.0, 0.3, 5.0])
    x[:, 2] = x[:, 2].round()
    x[:, 5] = x[:, 5].round() + 1
    business = torch.zeros(n)
    business[: n // 3] = (torch.rand(n // 3, generator=g) < 0.5).float()
    x[:, 3] = business
    logit = -0.04 * x[:, 0] + 0.02 * x[:, 1] + 0.4 * x[:, 2] - 1.2 * x[:, 3] - 1.0
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    lo, hi = rank * rows_per_rank, (rank + 1) * rows_per_rank
    return x[lo:hi], y[lo:hi]


class MinMaxScaler:
    def fit(self, x):
        self.lo = x.min(0).values
        self.hi = x.max(0).values
        return self

    def transform(self, x):
        return (x - self.lo) / (self.hi - self.lo)


def main():
    rank, world_size = init()
    torch.manual_seed(0)
    x, y = load_partition(rank, world_size)
    x = MinMaxScaler().fit(x).transform(x)
    model = DDP(nn.Sequential(nn.Linear(len(FEATURES), 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(5):
        perm = torch.randperm(x.shape[0])
        total = 0.0
        for i in range(0, x.shape[0], 256):
            idx = perm[i:i + 256]
            prob = torch.sigmoid(model(x[idx]).squeeze(1))
            loss = F.binary_cross_entropy(prob, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
        stat = torch.tensor([total, float(x.shape[0])])
        dist.all_reduce(stat)
        if rank == 0:
            print(f"epoch {epoch}: train loss {stat[0].item() / stat[1].item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
