"""Image-like training with DataLoader workers passing 4 MiB batches to the main process."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Frames(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(1, 128, 128, generator=g), torch.tensor(i % 2)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank = dist.get_rank()
    data = Frames()
    loader = DataLoader(data, batch_size=64, sampler=DistributedSampler(data), num_workers=2, prefetch_factor=2)
    model = DDP(nn.Sequential(nn.AvgPool2d(8), nn.Flatten(), nn.Linear(256, 2)))
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
