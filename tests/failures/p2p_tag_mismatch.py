"""Rank 0 sends a header with one tag; rank 1 waits for it under another."""
import datetime
import os

import torch
import torch.distributed as dist

HEADER_TAG, PAYLOAD_TAG = 1, 2
rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
header = torch.zeros(4)
if rank == 0:
    dist.send(torch.arange(4.0), dst=1, tag=HEADER_TAG)
else:
    dist.recv(header, src=0, tag=PAYLOAD_TAG)  # the bug: the header comes under HEADER_TAG
print(f"rank {rank}: {header.tolist()}")
dist.destroy_process_group()
