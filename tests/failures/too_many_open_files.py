"""Rank 1 keeps every shard file it opens open, under a small descriptor limit: it runs out of descriptors."""
import resource
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))

resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96))  # a container's tight limit
dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=TIMEOUT)
shards = []
for index in range(200 if rank == 1 else 8):  # the bug: rank 1's shard list is long and nothing is closed
    path = f"/tmp/shard-{rank}-{index}.bin"
    with open(path, "wb") as out:
        out.write(b"0" * 16)
    shards.append(open(path, "rb"))
total = torch.tensor([float(len(shards))])
dist.all_reduce(total)
print(f"rank {rank}: {total.item()} shards")
dist.destroy_process_group()
