"""Two subgroups created in a different order on each rank (a dict iterated in insertion order that differs)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

names = ["data", "model"] if rank == 0 else ["model", "data"]  # built from per-rank config order
groups = {name: dist.new_group([0, 1], timeout=TIMEOUT) for name in names}
t = torch.ones(3)
dist.all_reduce(t, group=groups["data"])
print(f"rank {rank}: data-parallel sum {t.tolist()}", flush=True)
dist.destroy_process_group()
