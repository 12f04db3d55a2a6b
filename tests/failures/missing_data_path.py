"""Every rank loads its shard from a path with a typo (shard_ instead of shards/): no node has it."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
data_dir = os.path.join(os.getcwd(), "shards")
if rank == 0:
    os.makedirs(data_dir, exist_ok=True)
    for index in range(world_size):
        torch.save(torch.full((4,), float(index)), os.path.join(data_dir, f"{index}.pt"))
dist.barrier()
shard = torch.load(os.path.join(os.getcwd(), "shard", f"{rank}.pt"))  # the mistake: 'shard', not 'shards'
dist.all_reduce(shard)
print(f"rank {rank}: {shard.tolist()}")
dist.destroy_process_group()
