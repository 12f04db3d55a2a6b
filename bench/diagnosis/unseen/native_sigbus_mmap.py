"""Samples are read from a memory-mapped cache file; on rank 1 the cache is rebuilt (truncated) while mapped."""
import datetime
import mmap
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
path = f"/tmp/features_{rank}.bin"
with open(path, "wb") as f:
    f.write(b"\0" * (1 << 20))
f = open(path, "r+b")
mapped = mmap.mmap(f.fileno(), 0)
features = torch.frombuffer(mapped, dtype=torch.float32)
if rank == 1:
    os.truncate(path, 0)  # a cache refresh rewrites the file in place
total = features[100_000:100_064].sum().reshape(1)
dist.all_reduce(total)
print(f"rank {rank}: {total.item()}", flush=True)
dist.destroy_process_group()
