"""scatter_object_list whose input list is built on rank 1 while src=0 (cf. pytorch/pytorch#74602)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

work_items = None
if rank == world - 1:  # the 'coordinator' was moved to the last rank, but src below still says 0
    work_items = [{"shard": i, "files": [f"part-{i}-{j}" for j in range(3)]} for i in range(world)]
mine = [None]
dist.scatter_object_list(mine, work_items, src=0)
print(f"rank {rank}: got {mine[0]}", flush=True)
dist.barrier()
dist.destroy_process_group()
