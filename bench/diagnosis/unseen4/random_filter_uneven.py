"""Detection-style training: random crops, and crops without enough foreground are skipped."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank, world = dist.get_rank(), dist.get_world_size()


class RandomCrops(IterableDataset):
    """Every rank gets 256 images (its shard); a crop with < 30% foreground is dropped."""

    def __iter__(self):
        gen = torch.Generator().manual_seed(rank)  # different augmentations per rank
        for i in range(256):
            crop = torch.rand(16, generator=gen)
            if crop.mean() < 0.47:  # "not enough foreground": skip this sample
                continue
            yield crop, crop.sum().reshape(1)


torch.manual_seed(0)
model = DDP(nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = 0
for x, y in DataLoader(RandomCrops(), batch_size=16):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    steps += 1
print(f"rank {rank}: epoch done after {steps} steps", flush=True)
total = torch.tensor([steps])
dist.all_reduce(total)
dist.destroy_process_group()
