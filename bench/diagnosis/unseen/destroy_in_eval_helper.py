"""Rank 0 evaluates after each epoch with a helper borrowed from an inference script."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))


def evaluate(model: torch.nn.Module) -> float:
    with torch.no_grad():
        score = model(torch.randn(32, 8)).mean().item()
    if dist.is_initialized():
        dist.destroy_process_group()  # the inference script cleaned up after itself
    return score


model = torch.nn.Linear(8, 1)
for epoch in range(3):
    model.zero_grad()
    model(torch.randn(16, 8)).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    if rank == 0:
        print(f"epoch {epoch}: score {evaluate(model):.3f}", flush=True)
print(f"rank {rank}: done", flush=True)
