"""Rank 0 logs the GPUs it trains on with nvidia-smi before training: the CPU nodes have no such command."""
import datetime
import os
import subprocess

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank == 0:
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout)  # the mistake
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank}: {total.item():g}")
dist.destroy_process_group()
