"""Rank 0 caches the tokenised dataset in /dev/shm, which is smaller than the cache: the write fails."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))

dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=TIMEOUT)
if rank == 0:
    try:
        with open("/dev/shm/tokens.cache", "wb") as cache:  # the bug: a 512 MiB folder for a 640 MiB cache
            for _ in range(40):
                cache.write(bytes(16 * 1024 * 1024))
    finally:
        if os.path.exists("/dev/shm/tokens.cache"):
            os.remove("/dev/shm/tokens.cache")
dist.barrier()
dist.destroy_process_group()
