"""init_method='file://...', torch's shared-file rendezvous, on a path under /tmp: each node makes its own file."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", init_method="file:///tmp/rendezvous_file", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))  # the mistake
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank}: {total.item():g}")
dist.destroy_process_group()
