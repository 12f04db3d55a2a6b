"""A hand-rolled TCPStore whose client connects to its own node's hostname instead of the master's."""
import datetime
import os
import socket

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
port = int(os.environ["MASTER_PORT"]) + 7
host = socket.gethostname()  # should be os.environ["MASTER_ADDR"] on every node
store = dist.TCPStore(host, port, world, is_master=(rank == 0), timeout=TIMEOUT)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
t = torch.ones(2)
dist.all_reduce(t)
print(f"rank {rank}: {t.tolist()}", flush=True)
dist.destroy_process_group()
