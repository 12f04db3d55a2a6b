"""Training steps where rank 1 reloads its data shard every few steps, slower than the process group's timeout:
rank 0 waits for it in all_reduce, gives up after PG_TIMEOUT seconds, while rank 1 is alive and busy in its own
code. Nothing crashed; one rank was late to a collective."""
import datetime
import os
import time

import torch
import torch.distributed as dist


def reload_shard(step: int) -> torch.Tensor:
    time.sleep(6 * int(os.environ.get("PG_TIMEOUT", 10)))  # stands for re-reading a shard from slow storage
    return torch.full((4,), float(step))


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
for step in range(6):
    batch = reload_shard(step) if rank == 1 and step == 3 else torch.ones(4)  # the mistake: one slow rank
    dist.all_reduce(batch)
    print(f"rank {rank} step {step} done", flush=True)
dist.destroy_process_group()
