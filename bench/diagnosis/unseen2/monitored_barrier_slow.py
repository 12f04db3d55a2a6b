"""monitored_barrier before training; rank 1 still compiles its kernels (a long warm-up) and misses it (cf. pytorch/pytorch#53787)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

def warm_up():
    print(f"rank {rank}: warming up", flush=True)
    time.sleep(3 * TIMEOUT.total_seconds())  # rank 1 warms a cache the others already have


if rank == 1:
    warm_up()
dist.monitored_barrier(timeout=TIMEOUT)
t = torch.ones(2)
dist.all_reduce(t)
print(f"rank {rank}: {t.tolist()}", flush=True)
dist.destroy_process_group()
