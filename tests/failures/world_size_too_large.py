"""The job says one more process than are launched: init waits for a rank that never comes, then times out."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1))) + 1  # the mistake: a hard-coded count
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
