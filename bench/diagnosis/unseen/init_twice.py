"""The trainer sets up distributed itself, and so does the data module it imports from the project."""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))


def setup_data(rank: int, world: int) -> list:
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=TIMEOUT)
    return [torch.randn(4) for _ in range(3)]


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=TIMEOUT)
batches = setup_data(rank, world)
for batch in batches:
    dist.all_reduce(batch)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
