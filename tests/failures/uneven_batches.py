"""Each rank trains on its own shard, and the shards differ in length: the rank with less data finishes and leaves
while the other still waits for it in DDP's all_reduce."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
samples = 64 if rank == 0 else 48  # the bug: the shards are cut unevenly (no DistributedSampler, no drop_last)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for start in range(0, samples, 16):
    optimizer.zero_grad()
    model(torch.randn(16, 8)).sum().backward()
    optimizer.step()
print(f"rank {rank}: done after {samples // 16} batches")
dist.destroy_process_group()
