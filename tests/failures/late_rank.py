"""Rank 1 builds its search index before joining; rank 0 joins at once and gives up waiting for it after
PG_TIMEOUT seconds, while rank 1 is alive and still busy."""
import datetime
import os
import time

import torch
import torch.distributed as dist


def load_index(seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    index = {}
    while time.monotonic() < deadline:  # stands for reading and hashing a large file
        index[len(index)] = sum(range(1000))
        time.sleep(0.05)
    return index


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = int(os.environ.get("PG_TIMEOUT", 10))
if rank == 1:
    index = load_index(6 * timeout)  # the mistake: slow work before init_process_group, longer than its timeout
dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=timeout))
t = torch.ones(1)
dist.all_reduce(t)
dist.destroy_process_group()
