"""Sharded checkpoint: rank 0 creates the step's folder, then every rank writes its own optimizer shard."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
step_dir = "/scratch/ckpt/step_000100"
if rank == 0:
    os.makedirs(step_dir, exist_ok=True)
dist.barrier()
torch.save({"exp_avg": torch.zeros(1000)}, os.path.join(step_dir, f"optim_shard{rank}.pt"))
dist.barrier()
print(f"rank {rank}: shard saved", flush=True)
dist.destroy_process_group()
