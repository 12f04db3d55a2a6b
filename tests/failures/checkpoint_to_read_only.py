"""Rank 0 saves a checkpoint next to the exercises, a folder the nodes mount read-only."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))

dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=TIMEOUT)
model = torch.nn.Linear(4, 4)
if rank == 0:
    torch.save(model.state_dict(), "/lab/exercises/checkpoint.pt")  # the bug: a read-only folder
dist.barrier()
dist.destroy_process_group()
