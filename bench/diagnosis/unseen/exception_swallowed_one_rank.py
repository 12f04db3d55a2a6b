"""Robust training loop: a batch that fails to decode is logged and skipped instead of killing a long job."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))


def decode(rank: int, index: int) -> torch.Tensor:
    if rank == 1 and index == 3:
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    return torch.randn(8, 6)


model = DistributedDataParallel(torch.nn.Linear(6, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for index in range(8):
    try:
        batch = decode(rank, index)
    except Exception as error:
        print(f"rank {rank}: skipping batch {index}: {error}", flush=True)
        continue
    optimizer.zero_grad()
    model(batch).sum().backward()
    optimizer.step()
print(f"rank {rank}: epoch done", flush=True)
dist.destroy_process_group()
