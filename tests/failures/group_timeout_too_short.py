"""Every rank joins a large all_reduce on a subgroup made with a 'fast failure' timeout far shorter than the transfer."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
fast = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(milliseconds=5))  # the bug
gradients = torch.ones(32 * 1024 * 1024)  # 128 MB
dist.all_reduce(gradients, group=fast)
print(f"rank {rank}: {gradients[0].item()}")
dist.destroy_process_group()
