"""Gradient accumulation is configured by an environment variable that a launch script exports on one node only:
that node's rank takes more micro-batches per step and all-reduces once per micro-batch, so the ranks' collectives
stop lining up and the run hangs until the timeout.
Run: lab exec --copy tests/failures/env_flag_on_one_node.py -- bash -c \
  '[ "$NODE_RANK" = 1 ] && export GRAD_ACCUM_STEPS=4; exec python env_flag_on_one_node.py'
"""
import datetime
import os

import torch
import torch.distributed as dist

rank, world = int(os.environ.get("NODE_RANK", 0)), int(os.environ.get("NNODES", 1))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
accumulation = int(os.environ.get("GRAD_ACCUM_STEPS", "1"))
torch.manual_seed(0)
model = torch.nn.Linear(32, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.Generator().manual_seed(rank)
for step in range(3):
    for micro in range(accumulation):
        model(torch.randn(8, 32, generator=data)).pow(2).mean().backward()
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)  # averaged after every micro-batch
            parameter.grad /= world
    optimizer.step()
    optimizer.zero_grad()
    print(f"rank {rank}: step {step} done", flush=True)
dist.destroy_process_group()
