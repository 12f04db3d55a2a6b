"""MASTER_PORT is already taken on the master node (a previous job, another service): the store cannot bind it.

Here rank 0 itself holds the port with a listening socket before it starts the process group.
Run with `lab exec` (with `lab torchrun` the agent's own store already holds the port).
"""
import datetime
import os
import socket

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
if rank == 0:
    squatter = socket.create_server(("", int(os.environ["MASTER_PORT"])))  # the leftover job holding the port
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
value = torch.ones(1)
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
