"""A plain DDP training loop; the launch sets TORCH_DISTRIBUTED_DEBUG on one node while debugging."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = DistributedDataParallel(torch.nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    optimizer.zero_grad()
    model(torch.randn(8, 16)).sum().backward()
    optimizer.step()
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
