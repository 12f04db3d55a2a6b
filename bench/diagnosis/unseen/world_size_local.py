"""Written for one machine with 2 GPUs, now launched on 2 nodes x 2 processes."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["LOCAL_WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: {t.item()}", flush=True)
dist.destroy_process_group()
