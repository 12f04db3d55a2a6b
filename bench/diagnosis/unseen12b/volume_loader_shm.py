"""Train a small 3-D classifier on CT sub-volumes with DDP; four DataLoader workers keep the step fed.

Each sample is one 64x192x192 float32 patch (about 9 MB); a batch holds 16 of them.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

PATCH = (1, 64, 192, 192)


class CTPatches(Dataset):
    """Stands in for patches cut from CT scans (synthetic here: noise plus a bright blob for class 1)."""

    def __init__(self, n=256):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        volume = torch.randn(PATCH, generator=g)
        label = i % 2
        if label:
            volume[:, 24:40, 80:112, 80:112] += 2.0
        return volume, label


class PooledNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(1, 8, 3, padding=1)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        x = F.avg_pool3d(x, 8)  # 8x24x24 before the convolution keeps the CPU step cheap
        x = F.relu(self.conv(x))
        return self.fc(x.mean(dim=(2, 3, 4)))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(PooledNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = CTPatches()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=4, prefetch_factor=2,
                        persistent_workers=True)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"rank {rank} epoch {epoch} step {step} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
