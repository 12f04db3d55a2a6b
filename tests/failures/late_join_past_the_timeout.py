"""Rank 1 verifies its data shard before it joins the process group, for 2 x PG_TIMEOUT: rank 0 gives up waiting
for it at the rendezvous, and rank 1 gets there afterwards, dialling a store that went away with rank 0 (under
torchrun, with node0's agent). Late, not lost, and not a wrong address: every rank was given the same one."""
import datetime
import hashlib
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = int(os.environ.get("PG_TIMEOUT", 10))


def verify_shard(rank: int) -> str:
    digest = hashlib.sha256()
    deadline = time.monotonic() + (2 * TIMEOUT if rank == 1 else 0.1)  # the mistake: rank 1's shard is huge
    while time.monotonic() < deadline:
        digest.update(b"\0" * 65536)
        time.sleep(0.01)  # stands for reading the next block from slow storage
    return digest.hexdigest()[:12]


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
print(f"rank {rank}: shard {verify_shard(rank)} verified", flush=True)
dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=TIMEOUT))
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank}: {total.item()} ranks", flush=True)
dist.destroy_process_group()
