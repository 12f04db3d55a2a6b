"""Rank 1 reads twice as many shard files and never closes them; the per-process open-file limit (ulimit -n 256) runs out."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
import resource
import tempfile

resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))  # the cluster's ulimit -n
folder = tempfile.mkdtemp()
handles = []
shards = 100 if rank == 0 else 400
for step in range(4):
    for i in range(shards // 4):
        path = os.path.join(folder, f"s{step}-{i}")
        with open(path, "w") as f:
            f.write("x")
        handles.append(open(path))  # leaked: read later 'lazily'
    t = torch.tensor([float(len(handles))])
    dist.all_reduce(t)
    print(f"rank {rank}: step {step} open files {len(handles)}", flush=True)
dist.destroy_process_group()
