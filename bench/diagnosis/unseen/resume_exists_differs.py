"""Resume if a checkpoint exists: the rank that finds one shares the step it resumes from with the others."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
CKPT = "/var/tmp/run42/latest.pt"
if rank == 0:  # a previous attempt of this job left a checkpoint behind on the first node
    os.makedirs(os.path.dirname(CKPT), exist_ok=True)
    torch.save({"step": 700}, CKPT)
start = [0]
if os.path.exists(CKPT):
    start = [torch.load(CKPT)["step"]]
    dist.broadcast_object_list(start, src=0)
model = torch.nn.Linear(8, 8)
for step in range(start[0], start[0] + 3):
    model.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
print(f"rank {rank}: trained from step {start[0]}", flush=True)
dist.destroy_process_group()
