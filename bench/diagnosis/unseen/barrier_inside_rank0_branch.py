"""After each epoch rank 0 writes a checkpoint; the others must not read it before it is complete."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = torch.nn.Linear(32, 4)
for epoch in range(3):
    for _ in range(4):
        model.zero_grad()
        model(torch.randn(8, 32)).sum().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
    if rank == 0:
        torch.save(model.state_dict(), f"epoch{epoch}.pt")
        dist.barrier()
    print(f"rank {rank}: epoch {epoch} done", flush=True)
dist.destroy_process_group()
