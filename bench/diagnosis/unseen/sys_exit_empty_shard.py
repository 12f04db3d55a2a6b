"""Each rank scores its shard of a file list; a rank with nothing to do exits early."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
files = [f"part-{i:03d}.jsonl" for i in range(3)]
per_rank = -(-len(files) // world) * 2  # files are handed out in chunks of twice the fair share
mine = files[rank * per_rank:(rank + 1) * per_rank]
if not mine:
    print(f"rank {rank}: no files for me, exiting", flush=True)
    sys.exit(0)
scores = torch.tensor([float(len(name)) for name in mine]).sum().reshape(1)
dist.all_reduce(scores)
print(f"rank {rank}: total score {scores.item()}", flush=True)
dist.destroy_process_group()
