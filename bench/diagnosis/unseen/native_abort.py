"""An extension checks its invariants and aborts the process when one fails (as a C++ CHECK would)."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))


def check_sorted(indices: torch.Tensor) -> None:
    if not bool((indices[1:] >= indices[:-1]).all()):
        os.write(2, b"F1125 sparse_ops.cc:88] Check failed: indices are sorted\n")
        os.abort()


for step in range(3):
    indices = torch.arange(32) if rank == 1 or step < 2 else torch.randperm(32)
    check_sorted(indices)
    values = torch.ones(32)
    dist.all_reduce(values)
    print(f"rank {rank}: step {step}", flush=True)
dist.destroy_process_group()
