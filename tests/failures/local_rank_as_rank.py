"""Written for one machine: the script passes LOCAL_RANK as the global rank. On two nodes each node has a
local rank 0, so two processes claim rank 0 and nobody is rank 1."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["LOCAL_RANK"])  # the bug: the rank within this node, not across nodes (RANK)
world_size = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: {t.item()}")
dist.destroy_process_group()
