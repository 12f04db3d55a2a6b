"""The evaluation group is built from the shards whose validation file a rank can see; node0 prepared every shard's
file, node1 only its own, so the ranks create the group with different members."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
VALIDATION = "/tmp/validation"
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
os.makedirs(VALIDATION, exist_ok=True)
for shard in range(world_size) if rank == 0 else [rank]:
    torch.save(torch.ones(4) * shard, f"{VALIDATION}/shard-{shard}.pt")
dist.barrier()
members = [shard for shard in range(world_size) if os.path.exists(f"{VALIDATION}/shard-{shard}.pt")]  # the bug
evaluation = dist.new_group(members)
if rank in members:
    score = torch.load(f"{VALIDATION}/shard-{rank}.pt").sum()
    dist.all_reduce(score, group=evaluation)
    print(f"rank {rank}: validation score {score.item()} over ranks {members}")
dist.destroy_process_group()
