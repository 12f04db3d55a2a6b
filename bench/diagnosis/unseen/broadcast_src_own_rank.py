"""Every rank loads the pretrained weights, then the weights are broadcast so that all replicas start equal."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
for param in model.parameters():
    dist.broadcast(param.data, src=dist.get_rank())
for step in range(3):
    loss = model(torch.randn(16, 64)).pow(2).mean()
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad)
print(f"rank {rank}: trained", flush=True)
dist.destroy_process_group()
