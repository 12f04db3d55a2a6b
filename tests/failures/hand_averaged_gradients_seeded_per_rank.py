"""Hand-written data parallelism: gradients are averaged with all_reduce, but each rank built its model under its
own seed and the weights were never broadcast, so the replicas differ from the first step and the final check raises.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1234 + rank)  # the mistake: a seed per rank before the model is built
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(5):
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    for parameter in model.parameters():
        dist.all_reduce(parameter.grad)
        parameter.grad /= world
    optimizer.step()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
if any(not torch.allclose(gathered[0], other) for other in gathered[1:]):
    raise RuntimeError("workers ended with different weights")
dist.destroy_process_group()
