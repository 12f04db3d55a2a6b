"""Fine-tune a small image classifier with DDP; the loader's worker count is sized from the cores each local rank
gets, and a loader timeout is set because a stuck worker once hung a whole weekend run.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class SyntheticImages(Dataset):
    """Decodes and augments a 3x32x32 image per index (stand-in for JPEG decode + random crop)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 36, 36, generator=g)
        dx, dy = torch.randint(0, 5, (2,), generator=g).tolist()
        return img[:, dy:dy + 32, dx:dx + 32], i % 10


def loader_workers() -> int:
    """Split this node's cores between the local ranks and keep one core per rank for the training loop."""
    cores = len(os.sched_getaffinity(0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(cores // local_world - 1, 0)


def main() -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    workers = loader_workers()
    print(f"rank {rank}: {workers} loader workers, batch timeout 120 s", flush=True)
    ds = SyntheticImages(2048)
    sampler = DistributedSampler(ds, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=64, sampler=sampler, num_workers=workers,
                        persistent_workers=workers > 0, timeout=120, drop_last=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                              nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and step % 5 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
