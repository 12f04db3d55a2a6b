"""A DataLoader worker on rank 1 decodes a sample with a C helper (ctypes) that dereferences a null pointer."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
import ctypes

from torch.utils.data import DataLoader, Dataset


class Shard(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if rank == 1 and i == 5:
            ctypes.string_at(0)  # 'fast decode' of a corrupt record: null pointer
        return torch.full((4,), float(i))


loader = DataLoader(Shard(), batch_size=4, num_workers=2)
for step, batch in enumerate(loader):
    s = batch.sum()
    dist.all_reduce(s)
    print(f"rank {rank}: step {step} sum {s.item()}", flush=True)
dist.destroy_process_group()
