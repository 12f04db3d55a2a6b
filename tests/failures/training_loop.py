"""A healthy training loop (nothing wrong with it): the lab breaks it from outside with `lab fault`.

Every step all-reduces a gradient and sleeps a little, so the job runs for about STEPS x 0.2 s;
a node killed, paused or cut off mid-run leaves its peer waiting in all_reduce until PG_TIMEOUT.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
for step in range(int(os.environ.get("STEPS", 600))):
    gradient = torch.ones(1024)
    dist.all_reduce(gradient)
    if step % 10 == 0:
        print(f"rank {rank}: step {step}", flush=True)
    time.sleep(0.2)
dist.destroy_process_group()
