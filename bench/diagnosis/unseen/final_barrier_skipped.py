"""At the end rank 0 exports the model; everyone waits on a final barrier so nobody tears down early."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = torch.nn.Linear(8, 8)
for step in range(3):
    model.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)


def finish(rank: int) -> None:
    if rank != 0:
        return
    torch.save(model.state_dict(), "final.pt")
    dist.barrier()


finish(rank)
print(f"rank {rank}: finished", flush=True)
dist.destroy_process_group()
