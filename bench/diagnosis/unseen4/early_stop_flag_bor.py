"""Stop every rank as soon as any rank's validation loss stops improving."""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()
torch.manual_seed(rank)

best = float("inf")
for epoch in range(10):
    val_loss = 1.0 / (epoch + 1) + 0.05 * torch.rand(1).item()
    worse = val_loss > best
    best = min(best, val_loss)
    stop = torch.tensor([float(worse)])
    dist.all_reduce(stop, op=dist.ReduceOp.BOR)  # any rank wants to stop
    if stop.item():
        print(f"rank {rank}: early stop at epoch {epoch}", flush=True)
        break
dist.destroy_process_group()
