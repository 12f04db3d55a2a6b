"""The learning-rate scheduler is stepped inside the logging block that only rank 0 runs: rank 0's rate halves every
epoch, rank 1's stays. DDP averages the gradients, so the replicas differ only by their updates, and the script's
check of the weights at the end raises.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
data = torch.Generator().manual_seed(rank)
for epoch in range(4):
    x = torch.randn(16, 8, generator=data)
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
    if rank == 0:
        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:g}", flush=True)
        scheduler.step()  # the mistake: only rank 0 steps its scheduler
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
everyone = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
dist.all_gather(everyone, flat)
if not all(torch.allclose(everyone[0], other) for other in everyone[1:]):
    raise RuntimeError("model replicas differ after training")
dist.destroy_process_group()
