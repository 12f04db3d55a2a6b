"""Rank 0 downloads and unpacks the dataset while the others wait at a barrier."""
import datetime
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
pg_timeout = int(os.environ.get("PG_TIMEOUT", 10))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=pg_timeout))
if rank == 0:
    for part in range(3):
        print(f"rank 0: downloading part {part + 1}/3", flush=True)
        time.sleep(pg_timeout * 0.6)  # a slow mirror
dist.barrier()
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: dataset ready, {t.item()}", flush=True)
dist.destroy_process_group()
