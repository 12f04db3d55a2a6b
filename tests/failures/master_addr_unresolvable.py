"""MASTER_ADDR names a host that does not exist (a typo in the hostname): no node can resolve it."""
import datetime
import os

import torch
import torch.distributed as dist

os.environ["MASTER_ADDR"] = "nodee0"  # the mistake: a typo for node0
rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
