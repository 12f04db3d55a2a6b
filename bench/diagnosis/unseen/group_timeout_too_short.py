"""A gradient-compression group with its own tight timeout so that a straggler is detected quickly."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
fast_group = dist.new_group(ranks=list(range(world)), timeout=datetime.timedelta(milliseconds=20))
grads = torch.randn(48 * 1024 * 1024 // 4)  # 48 MB of fp32 gradients
for step in range(3):
    dist.all_reduce(grads, group=fast_group)
    print(f"rank {rank}: step {step} synced", flush=True)
dist.destroy_process_group()
