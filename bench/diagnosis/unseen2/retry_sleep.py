"""Rank 1 retries a feature-store connection with exponential backoff before the first collective; the backoff outlasts the process group timeout."""
import datetime
import os
import time

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
dist.init_process_group("gloo", timeout=TIMEOUT)
rank, world = dist.get_rank(), dist.get_world_size()
import socket


def fetch_features():
    delay = 2.0
    for attempt in range(4):
        try:
            with socket.create_connection(("127.0.0.1", 1), timeout=1):  # feature store not running on this node
                return torch.ones(4)
        except OSError as exc:
            print(f"rank {rank}: feature store attempt {attempt} failed ({exc}); retrying in {delay:.0f} s", flush=True)
            time.sleep(delay)
            delay *= 2
    return torch.zeros(4)


features = fetch_features() if rank == 1 else torch.ones(4)
dist.broadcast(features, src=0)
dist.all_reduce(features)
print(f"rank {rank}: {features.tolist()}", flush=True)
dist.destroy_process_group()
