"""GLOO_SOCKET_IFNAME names an interface the node does not have (copied from a cluster where it was ib0)."""
import datetime
import os

import torch
import torch.distributed as dist

os.environ["GLOO_SOCKET_IFNAME"] = "ib0"  # the mistake: the lab's nodes have eth0
rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
