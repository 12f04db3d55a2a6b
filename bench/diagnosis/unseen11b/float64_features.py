"""Train on features computed with numpy (log-scaled counts)."""
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Counts(Dataset):
    def __init__(self, n=200):
        rng = np.random.default_rng(11)
        self.counts = rng.poisson(20, size=(n, 10))
        self.labels = (self.counts[:, 0] > 20).astype(np.int64)

    def __len__(self):
        return len(self.counts)

    def __getitem__(self, i):
        features = np.log1p(self.counts[i]) / np.log(50)
        return torch.from_numpy(features), torch.tensor(self.labels[i])


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    data = Counts()
    loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data))
    model = DDP(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
