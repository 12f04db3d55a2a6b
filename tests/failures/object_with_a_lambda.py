"""Every rank shares its metrics with all_gather_object, but one metric is a lambda: it cannot be pickled."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))

dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=TIMEOUT)
metrics = {"loss": 0.5 + rank, "smooth": lambda value: 0.9 * value}  # the bug: a function in the payload
gathered = [None] * world_size
dist.all_gather_object(gathered, metrics)
print(f"rank {rank}: {gathered}")
dist.destroy_process_group()
