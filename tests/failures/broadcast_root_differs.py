"""Every rank broadcasts "from the main process" but computes the main process per node: the roots differ."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
weights = torch.randn(256)
main_process = rank - rank % local_world  # the bug: the first rank of each node, not of the job
dist.broadcast(weights, src=main_process)
print(f"rank {rank}: {weights[:2].tolist()}")
dist.destroy_process_group()
