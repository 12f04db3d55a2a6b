"""Each rank keeps every batch it loads (a leak): the node's memory limit is hit and the kernel kills it.

Run on a lab with a memory limit: `lab up --nodes 2 --memory 1g`.
"""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 30))))
kept = []
for step in range(1000):
    batch = torch.ones(64 * 2**20 // 4)  # 64 MiB, never freed: the bug
    kept.append(batch)
    dist.all_reduce(batch[:1])
print(f"rank {rank}: done")
