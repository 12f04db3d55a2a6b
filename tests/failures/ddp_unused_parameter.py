"""A DDP model with a head the loss never uses: DDP waits for its gradient and fails on the next step."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(8, 8)
        self.aux_head = torch.nn.Linear(8, 2)  # the bug: defined, never used in forward

    def forward(self, x):
        return self.body(x).sum()


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = DistributedDataParallel(Model())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    model(torch.randn(4, 8)).backward()
    optimizer.step()
print(f"rank {rank}: trained")
dist.destroy_process_group()
