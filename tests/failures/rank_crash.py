"""One rank raises in its training step; the others wait for it in all_reduce until gloo notices it is gone."""
import datetime
import os

import torch
import torch.distributed as dist


def load_batch(rank: int) -> torch.Tensor:
    if rank == 1:
        raise ValueError("corrupt sample in shard 1")  # the bug: only rank 1's data hits it
    return torch.ones(4)


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
batch = load_batch(rank)
dist.all_reduce(batch)
print(f"rank {rank}: {batch.tolist()}")
dist.destroy_process_group()
