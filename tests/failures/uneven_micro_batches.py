"""Gradient accumulation by token budget: each rank packs its own documents into micro-batches of at most BUDGET
tokens and all-reduces the token count of each micro-batch (to normalise the loss), then the gradients once per step.
The ranks' documents differ in length, so they pack different numbers of micro-batches: one rank's gradient
all_reduce meets another's token count. gloo reports sizes that differ, as for a shape bug; the ranks' Flight
Recorders show two different calls at one sequence number: the ranks are out of step."""
import datetime
import os

import torch
import torch.distributed as dist

BUDGET = 64


def pack(lengths: list[int]) -> list[list[int]]:
    batches, current = [], []
    for length in lengths:
        if current and sum(current) + length > BUDGET:
            batches.append(current)
            current = []
        current.append(length)
    return batches + ([current] if current else [])


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
generator = torch.Generator().manual_seed(rank)  # each rank reads its own shard of documents
weights = torch.zeros(8, 4)
for step in range(3):
    lengths = torch.randint(8, 40, (6,), generator=generator).tolist()
    grad = torch.zeros_like(weights)
    for micro in pack(lengths):  # the mistake: how many micro-batches depends on this rank's documents
        tokens = torch.tensor(float(sum(micro)))
        dist.all_reduce(tokens)
        grad += torch.ones_like(weights) * sum(micro) / tokens
    dist.all_reduce(grad)
    weights -= 0.1 * grad / world_size
    print(f"rank {rank}: step {step} done", flush=True)
dist.destroy_process_group()
