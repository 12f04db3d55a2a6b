"""Random augmentation policy; when the policy draws 'mixup', the mixing weight is averaged across ranks."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
torch.manual_seed(1234 + rank)  # different data augmentation per rank
model = DistributedDataParallel(torch.nn.Linear(8, 2))
for step in range(4):
    batch = torch.randn(16, 8)
    if torch.rand(1).item() < 0.5:
        lam = torch.rand(1)
        dist.all_reduce(lam)
        lam /= world
        batch = lam * batch + (1 - lam) * batch.flip(0)
    model(batch).sum().backward()
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
