"""Rank 1 builds its copy of the model on the meta device to save memory and "receives" rank 0's weights by broadcast.

A meta tensor has a shape and no data: the broadcasts into it move nothing and rank 1 goes on at once, while rank 0
waits in its first broadcast for a receiver that never takes part; rank 1 then fails at its first forward.
"""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
rank = dist.get_rank()
device = "cpu" if rank == 0 else "meta"  # the mistake: the receivers' weights never get a real tensor
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
for parameter in model.parameters():
    dist.broadcast(parameter.data, src=0)
out = model(torch.ones(2, 16, device=device))
print(f"rank {rank}: output {out.sum().item():.3f}", flush=True)
dist.destroy_process_group()
