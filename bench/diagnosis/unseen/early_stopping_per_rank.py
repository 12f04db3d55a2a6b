"""Early stopping with patience 2 on the validation loss each rank measures on its own validation shard."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
val_curves = {0: [0.9, 0.8, 0.7, 0.65, 0.6, 0.58], 1: [0.9, 0.85, 0.86, 0.87, 0.7, 0.6]}
best, bad_epochs = float("inf"), 0
for epoch, val_loss in enumerate(val_curves[rank % 2]):
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(16, 8)).pow(2).mean().backward()
        optimizer.step()
    if val_loss < best:
        best, bad_epochs = val_loss, 0
    else:
        bad_epochs += 1
    if bad_epochs >= 2:
        print(f"rank {rank}: early stop at epoch {epoch}", flush=True)
        break
print(f"rank {rank}: best val {best}", flush=True)
dist.destroy_process_group()
