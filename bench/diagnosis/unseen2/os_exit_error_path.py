"""An error path calls os._exit(3) on rank 1 when its shard index is missing, skipping cleanup and the collectives."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

def load_index(r):
    index = {0: list(range(8))}  # the index of shard 1 was never built
    if r not in index:
        print(f"rank {r}: no index for shard {r}", flush=True)
        os._exit(3)
    return index[r]


items = load_index(rank)
for step in range(0, len(items), 2):
    t = torch.tensor([float(step)])
    dist.all_reduce(t)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
