"""A FileStore rendezvous, as torch's own tests use on one machine: every rank opens the same file name. On two nodes
/tmp is each node's own disk, so each node makes its own file and waits there for ranks that never come."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
store = dist.FileStore("/tmp/rendezvous_store", world_size)  # the mistake: a node-local path
store.set_timeout(timeout)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank}: {total.item():g}")
dist.destroy_process_group()
