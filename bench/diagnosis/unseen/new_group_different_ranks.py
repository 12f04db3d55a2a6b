"""Hierarchical all-reduce: first within each node, then across nodes; 2 processes per node."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local_world = int(os.environ["LOCAL_WORLD_SIZE"])
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
node = rank // local_world
my_node = list(range(node * local_world, (node + 1) * local_world))
intra = dist.new_group(ranks=my_node, timeout=timeout)
grads = torch.full((1024,), float(rank))
dist.all_reduce(grads, group=intra)
print(f"rank {rank}: node sum {grads[0].item()}", flush=True)
dist.destroy_process_group()
