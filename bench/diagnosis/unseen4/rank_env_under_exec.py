"""A training script written for torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK)."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
t = torch.ones(4) * rank
dist.all_reduce(t)
print(f"rank {rank}/{world_size} (local {local_rank}): {t.tolist()}", flush=True)
dist.destroy_process_group()
