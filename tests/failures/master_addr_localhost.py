"""MASTER_ADDR=localhost on a multi-node job: every node looks for the store on itself.

The rank-0 node serves it and waits for peers that never arrive; the others retry against their own
loopback. Works on one node, hangs (here: fails after PG_TIMEOUT s) across nodes.
"""
import datetime
import os

import torch
import torch.distributed as dist

os.environ["MASTER_ADDR"] = "localhost"  # the mistake: copied from a single-machine tutorial
rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
