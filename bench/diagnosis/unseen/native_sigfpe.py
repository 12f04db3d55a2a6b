"""A C helper (through ctypes) splits the samples into buckets; on rank 1 the bucket count comes out zero."""
import ctypes
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
libc = ctypes.CDLL(None)
libc.div.restype = ctypes.c_longlong
samples = 1000 if rank == 0 else 7
buckets = samples // 8  # 0 on rank 1
per_bucket = libc.div(ctypes.c_int(samples), ctypes.c_int(buckets))
counts = torch.tensor([float(samples)])
dist.all_reduce(counts)
print(f"rank {rank}: {counts.item()} samples", flush=True)
dist.destroy_process_group()
