"""A native call reads invalid memory on one rank (a bad pointer in a C extension): SIGSEGV kills it."""
import ctypes
import datetime
import os

import torch
import torch.distributed as dist


def decode_record(rank: int) -> torch.Tensor:
    if rank == 1:
        ctypes.string_at(0)  # the bug: a C call through a null pointer
    return torch.ones(8)


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
batch = decode_record(rank)
dist.all_reduce(batch)
print(f"rank {rank}: {batch.sum().item()}")
dist.destroy_process_group()
