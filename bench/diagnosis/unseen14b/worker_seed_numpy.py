"""Train a small 1-D signal classifier with on-the-fly numpy augmentation in DataLoader worker processes.

Each worker reseeds numpy from its torch seed so that workers (and epochs) do not repeat the same augmentation
(numpy's global state is copied into every forked worker otherwise).
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Signals(Dataset):
    def __init__(self, n=800, length=128):
        rng = np.random.default_rng(0)
        self.freq = rng.integers(1, 5, size=n)
        self.length = length

    def __len__(self):
        return len(self.freq)

    def __getitem__(self, i):
        t = np.linspace(0, 1, self.length, dtype=np.float32)
        shift = np.random.uniform(0, 2 * np.pi)            # augmentation: random phase and noise
        x = np.sin(2 * np.pi * self.freq[i] * t + shift) + np.random.normal(0, 0.2, self.length)
        return torch.from_numpy(x.astype(np.float32)), int(self.freq[i] - 1)


def seed_worker(worker_id):
    seed = torch.initial_seed()
    np.random.seed(seed)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = Signals()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler, num_workers=2, worker_init_fn=seed_worker)
    model = DDP(nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 4)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
