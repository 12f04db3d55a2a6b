"""DDP script from a one-machine, two-GPU tutorial: world size written in the code."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD_SIZE = 2  # two GPUs
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE,
                        timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
model = DDP(nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {rank}: trained, loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
