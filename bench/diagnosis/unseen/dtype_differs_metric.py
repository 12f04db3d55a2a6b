"""Accuracy is accumulated per rank and averaged at the end of the epoch."""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
correct, count = 0.0, 0
for batch in range(5):
    predictions = np.random.randint(0, 2, 32)
    if rank == 1 and batch == 2:
        correct += np.mean(predictions == 1) * 32  # this sample path returns numpy's float64
    else:
        correct += float((predictions == 1).sum())
    count += 32
stats = torch.tensor([correct, count])
dist.all_reduce(stats)
print(f"rank {rank}: accuracy {stats[0].item() / stats[1].item():.3f}", flush=True)
dist.destroy_process_group()
