"""Per-worker augmentation seeds derived from the global rank, with DataLoader workers started by 'spawn'
(chosen to avoid fork-related issues with threads)."""
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class NoisySignals(Dataset):
    def __len__(self):
        return 512

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(24, generator=g)
        return x + 0.05 * random.random(), x[:4].sum().unsqueeze(0)


def seed_worker(worker_id):
    """Distinct augmentation streams on every worker of every rank."""
    seed = 1000 * dist.get_rank() + worker_id
    random.seed(seed)
    torch.manual_seed(seed)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    ds = NoisySignals()
    loader = DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds, seed=0), num_workers=2,
                        worker_init_fn=seed_worker, multiprocessing_context="spawn")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    for epoch in range(2):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
