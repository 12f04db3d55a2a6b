"""An evaluate() helper tears the process group down on rank 1 (its 'cleanup'); training then calls all_reduce."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

def evaluate(r):
    score = torch.tensor([0.5 + r])
    if r != 0:
        dist.destroy_process_group()  # meant for the end of the run, copied into the eval helper
    return score


for epoch in range(2):
    loss = torch.tensor([1.0])
    dist.all_reduce(loss)
    evaluate(rank)
    print(f"rank {rank}: epoch {epoch} done", flush=True)
dist.destroy_process_group()
