"""Rank 0 prepares the dataset index and announces it through the job's key-value store."""
import datetime
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1, world, rank == 0,
                      timeout=timeout)
if rank == 0:
    store.set("dataset/index_ready", "shards=64")
store.wait(["dataset/index-ready"])
print(f"rank {rank}: index is {store.get('dataset/index_ready').decode()}", flush=True)
