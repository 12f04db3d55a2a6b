"""Each rank prepares its own share of the data after joining the group; rank 1's share is the big one, and preparing
it takes 2 x PG_TIMEOUT. Rank 0 waits in DDP's first collective (its construction), gives up at the timeout; rank 1
gets there afterwards and finds its peer gone. No stack is left of where rank 1 was (it was no longer there when the
run ended): the ranks' Flight Recorders say when each entered that collective."""
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

TIMEOUT = int(os.environ.get("PG_TIMEOUT", 10))


def prepare_share(rank: int) -> torch.Tensor:
    sizes = [1, 40]  # the mistake: the big file falls to rank 1, and nothing bounds how long it takes
    time.sleep(sizes[rank % 2] * TIMEOUT / 20)  # stands for tokenizing the files of this rank's share
    return torch.randn(64, 8)


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=TIMEOUT))
data = prepare_share(rank)
print(f"rank {rank}: prepared {len(data)} rows", flush=True)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
for start in range(0, len(data), 16):
    model(data[start:start + 16]).sum().backward()
print(f"rank {rank}: done", flush=True)
dist.destroy_process_group()
