"""Rank 0 sends the list of files to process; workers send back their counts."""
import datetime
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank == 0:
    files = [[f"part-{i}" for i in range(r, 8, world)] for r in range(world)]
    mine = [None]
    dist.scatter_object_list(mine, files, src=0)
else:
    received = [None] * world
    dist.all_gather_object(received, None)
    mine = [received[0]]
counts = [None] * world
dist.all_gather_object(counts, len(mine[0] or []))
print(f"rank {rank}: counts {counts}", flush=True)
dist.destroy_process_group()
