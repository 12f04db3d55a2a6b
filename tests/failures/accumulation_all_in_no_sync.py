"""Gradient accumulation with every micro-batch inside DDP's no_sync(): the gradients are never averaged.

The loop wraps all ACCUM micro-batches in `model.no_sync()`, the last one too, so no backward all-reduces; each rank
steps on its own gradients, the replicas drift apart, and the script's check of the weights raises.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

ACCUM = 4
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.Generator().manual_seed(100 + rank)
for step in range(3):
    with model.no_sync():  # the mistake: the last micro-batch must run outside it
        for _ in range(ACCUM):
            x = torch.randn(16, 8, generator=data)
            model(x).pow(2).mean().div(ACCUM).backward()
    optimizer.step()
    optimizer.zero_grad()
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
everyone = [torch.empty_like(weights) for _ in range(dist.get_world_size())]
dist.all_gather(everyone, weights)
if any(not torch.equal(everyone[0], other) for other in everyone[1:]):
    raise RuntimeError(f"model replicas differ after {step + 1} steps")
dist.destroy_process_group()
