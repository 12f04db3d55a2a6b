"""Ranks pass tensors of different sizes to one all_reduce (an uneven last batch)."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
gradients = torch.ones(8 + rank)  # the bug: each rank's length differs
dist.all_reduce(gradients)
print(f"rank {rank}: {gradients.sum().item()}")
dist.destroy_process_group()
