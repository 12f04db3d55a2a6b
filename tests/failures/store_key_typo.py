"""Rank 0 announces that the data is ready under one store key; the others wait for a key spelled differently."""
import datetime
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, world_size, rank == 0,
                      timeout=timeout)
if rank == 0:
    store.set("dataset/ready_epoch_0", "1")
else:
    store.wait(["dataset/ready-epoch-0"])  # the bug: '-' where rank 0 wrote '_'
print(f"rank {rank}: data ready")
store.set(f"done/{rank}", "1")
store.wait([f"done/{peer}" for peer in range(world_size)])
