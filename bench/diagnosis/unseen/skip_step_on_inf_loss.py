"""Mixed-precision style guard: a step whose loss is not finite is skipped (no backward, no optimizer step)."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    batch = torch.randn(8, 4)
    if rank == 1 and step == 2:
        batch[0, 0] = float("inf")  # one corrupt sample in rank 1's shard
    loss = model(batch).pow(2).mean()
    if not torch.isfinite(loss):
        print(f"rank {rank}: non-finite loss at step {step}, skipping", flush=True)
        continue
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
