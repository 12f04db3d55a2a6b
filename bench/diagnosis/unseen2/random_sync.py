"""A stochastic 'sync this step?' decision drawn from a generator seeded with the rank."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
import random

rng = random.Random(1234 + rank)  # per-rank seed, meant for data augmentation only
params = torch.ones(8)
for step in range(6):
    params -= 0.01
    if rng.random() < 0.5:  # local-SGD style: average every now and then
        dist.all_reduce(params)
        params /= world
    print(f"rank {rank}: step {step}", flush=True)
dist.barrier()
dist.destroy_process_group()
