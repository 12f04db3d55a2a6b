"""The non-zero ranks dial a MASTER_PORT where nothing listens: their connection is refused, again and again.

Rank 0 serves the store on MASTER_PORT; the others were given MASTER_PORT + 1 (two launch scripts that
drifted apart).
"""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
if rank != 0:
    os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 1)  # the mistake
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
