"""Rendezvous through a file, as in the docs' shared-file-system example."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", init_method="file:///tmp/torch_rendezvous", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {rank}: sum {t.item()}", flush=True)
dist.destroy_process_group()
