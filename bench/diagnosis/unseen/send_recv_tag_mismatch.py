"""Rank 0 ships the labels and the features of each batch to rank 1 with tags so they cannot be confused."""
import datetime
import os

import torch
import torch.distributed as dist

FEATURES, LABELS = 1, 2

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank == 0:
    dist.send(torch.randn(32, 10), dst=1, tag=FEATURES)
    dist.send(torch.randint(0, 2, (32,)).float(), dst=1, tag=FEATURES)
    print("rank 0: batch sent", flush=True)
else:
    features = torch.empty(32, 10)
    labels = torch.empty(32)
    dist.recv(features, src=0, tag=FEATURES)
    dist.recv(labels, src=0, tag=LABELS)
    print(f"rank 1: got {features.shape} and {labels.shape}", flush=True)
dist.barrier()
dist.destroy_process_group()
