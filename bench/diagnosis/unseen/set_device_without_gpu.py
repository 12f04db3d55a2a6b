"""Pins each process to its GPU before building the model (the usual DDP recipe)."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
torch.cuda.set_device(local_rank)
model = DistributedDataParallel(torch.nn.Linear(8, 2))
model(torch.randn(4, 8)).sum().backward()
print(f"rank {rank}: ok", flush=True)
dist.destroy_process_group()
