"""Each rank builds its model from its own config: rank 1 reads a different hidden size, so DDP's replicas differ."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
hidden = 16 if rank == 0 else 32  # the bug: the config differs per node (a stale file on node1)
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.Linear(hidden, 1)))
print(f"rank {rank}: model ready")
dist.destroy_process_group()
