"""broadcast_object_list of an object whose class is defined only under 'if rank == 0'."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

if rank == 0:
    class RunConfig:
        def __init__(self):
            self.lr = 0.1
            self.steps = 3

    obj = [RunConfig()]
else:
    obj = [None]
dist.broadcast_object_list(obj, src=0)
cfg = obj[0]
for step in range(cfg.steps):
    t = torch.tensor([cfg.lr])
    dist.all_reduce(t)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
