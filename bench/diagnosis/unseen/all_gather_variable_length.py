"""Gathers every rank's predictions for the whole validation set to compute an exact AUC."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
validation_size = 1001
mine = list(range(rank, validation_size, world))  # strided split, no padding
scores = torch.rand(len(mine))
gathered = [torch.empty_like(scores) for _ in range(world)]
dist.all_gather(gathered, scores)
print(f"rank {rank}: gathered {sum(t.numel() for t in gathered)} scores", flush=True)
dist.destroy_process_group()
