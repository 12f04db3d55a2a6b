"""Rank 0 runs evaluation in a group of its own; the data-parallel group is created afterwards."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
if rank == 0:
    eval_group = dist.new_group(ranks=[0], timeout=timeout)
data_parallel = dist.new_group(ranks=list(range(world)), timeout=timeout)
grads = torch.ones(4096)
for step in range(3):
    dist.all_reduce(grads, group=data_parallel)
print(f"rank {rank}: synced {grads[0].item()}", flush=True)
dist.destroy_process_group()
