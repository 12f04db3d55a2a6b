"""Sharded gradient reduce_scatter whose shard size comes from each rank's own parameter count (cf. pytorch/pytorch#150248)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()

# each rank pads its flat gradient to a multiple of the world size, but the local model differs in size:
local_params = 10 if rank == 0 else 11          # rank 1 kept an extra bias from its local config
shard = -(-local_params // world)              # ceil
flat = torch.ones(shard * world)
out = torch.zeros(shard)
for step in range(3):
    dist.reduce_scatter_tensor(out, flat)
    print(f"rank {rank}: step {step} shard {out.tolist()}", flush=True)
dist.destroy_process_group()
