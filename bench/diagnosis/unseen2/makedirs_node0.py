"""The checkpoint folder is created by rank 0 only, under a node-local path; rank 1 saves into it."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

ckpt_dir = "/tmp/experiment-42/checkpoints"
if rank == 0:
    os.makedirs(ckpt_dir, exist_ok=True)
dist.barrier()  # 'now the folder exists everywhere'
weights = {"w": torch.randn(4, 4) + rank}
torch.save(weights, os.path.join(ckpt_dir, f"shard-{rank}.pt"))
dist.barrier()
print(f"rank {rank}: saved", flush=True)
dist.destroy_process_group()
