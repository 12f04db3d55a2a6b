"""Rank 0 skips a barrier the others call: from then on the ranks wait in different collectives.

With gloo the barrier's messages reach rank 0's all_reduce (or nothing answers) and the job hangs until
the process group's timeout; a stack dump shows rank 0 in all_reduce and the others in barrier.
"""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank != 0:  # the bug: a logging barrier only the workers reach
    dist.barrier()
value = torch.ones(1)
dist.all_reduce(value)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
