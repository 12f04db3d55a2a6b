"""Two ranks swap their halves of a buffer, and both receive first: each waits for the other to send."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
peer = 1 - rank
mine, theirs = torch.full((1024,), float(rank)), torch.empty(1024)
dist.recv(theirs, src=peer)  # the bug: both ranks receive first, so neither ever sends
dist.send(mine, dst=peer)
print(f"rank {rank}: got {theirs[0].item()}")
dist.destroy_process_group()
