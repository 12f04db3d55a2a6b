"""Model width comes from the environment (exported in the node's shell profile), default 256."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
hidden = int(os.environ.get("MODEL_HIDDEN", "256"))
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.Linear(hidden, 10)))
model(torch.randn(4, 64)).sum().backward()
print(f"rank {rank}: hidden {hidden}", flush=True)
dist.destroy_process_group()
