"""The backend comes from DIST_BACKEND, which node1's login profile sets to 'mpi' (cf. pytorch/pytorch#106365)."""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
backend = os.environ.get("DIST_BACKEND", "gloo")
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
print(f"rank {rank}: backend {backend}", flush=True)
dist.init_process_group(backend, rank=rank, world_size=world, timeout=TIMEOUT)
t = torch.ones(3) * rank
dist.all_reduce(t)
print(f"rank {rank}: {t.tolist()}", flush=True)
dist.destroy_process_group()
