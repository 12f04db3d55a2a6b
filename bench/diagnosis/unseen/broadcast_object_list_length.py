"""Rank 0 reads the config and tokenizer settings and broadcasts them; the others pass placeholders."""
import datetime
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank == 0:
    payload = [{"lr": 3e-4, "layers": 12}, {"vocab": 32000, "lowercase": True}]
else:
    payload = [None]
dist.broadcast_object_list(payload, src=0)
print(f"rank {rank}: config {payload[0]}", flush=True)
dist.destroy_process_group()
