"""A script written for torchrun reads RANK and WORLD_SIZE from the environment; started with `lab exec`, one plain
process per node, nothing sets them."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])  # the mistake (under lab exec): torchrun sets RANK, lab exec sets NODE_RANK
world_size = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank}: {total.item():g}")
dist.destroy_process_group()
