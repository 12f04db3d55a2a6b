"""Rank 0 ships the DDP-wrapped model's state_dict (keys 'module.*') to rank 1, which loads it into a plain model."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
ddp = DDP(model)
payload = [ddp.state_dict() if rank == 0 else None]   # should be ddp.module.state_dict()
dist.broadcast_object_list(payload, src=0)
if rank != 0:
    evaluator = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    evaluator.load_state_dict(payload[0])
dist.barrier()
print(f"rank {rank}: evaluator ready", flush=True)
dist.destroy_process_group()
