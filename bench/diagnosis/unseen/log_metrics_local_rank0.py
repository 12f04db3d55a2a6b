"""Metrics are averaged and logged by the first process of each node; 2 processes per node."""
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
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    optimizer.zero_grad()
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    optimizer.step()
    if local_rank == 0:
        avg = loss.detach().reshape(1)
        dist.all_reduce(avg)
        print(f"rank {rank}: step {step} loss {avg.item() / world:.3f}", flush=True)
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
