"""Regression on tabular data with a hand-written sharded sampler (one contiguous block per rank)."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset


class BlockShardSampler(Sampler):
    """Contiguous block of the dataset for this rank (keeps each file's rows together)."""

    def __init__(self, length, num_replicas=dist.get_world_size() if dist.is_available() else 1,
                 rank=dist.get_rank() if dist.is_available() else 0):
        self.length = length
        self.num_replicas = num_replicas
        self.rank = rank
        self.per_rank = math.ceil(length / num_replicas)

    def __iter__(self):
        start = self.rank * self.per_rank
        return iter(range(start, min(start + self.per_rank, self.length)))

    def __len__(self):
        return min(self.per_rank, self.length - self.rank * self.per_rank)


def make_table(rows=4000, cols=12, seed=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g)
    y = x @ torch.linspace(-1, 1, cols) + 0.1 * torch.randn(rows, generator=g)
    return TensorDataset(x, y)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    data = make_table()
    loader = DataLoader(data, batch_size=64, sampler=BlockShardSampler(len(data)))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x).squeeze(-1), y)
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
