"""Two-tower retrieval trainer with a row-wise sharded item embedding table.

Each rank owns a contiguous block of item rows; lookups are routed to the owner
with all_to_all and the looked-up rows come back the same way.
"""
import os
from datetime import timedelta

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
import torch.distributed.nn.functional as dfn

NUM_ITEMS = 4000
NUM_USERS = 2000
DIM = 16
BATCH = 1024
STEPS = 60


def shard_starts(num_rows, world):
    per = (num_rows + world - 1) // world
    return [min(r * per, num_rows) for r in range(world + 1)]


class RowShardedEmbedding(nn.Module):
    def __init__(self, num_rows, dim, rank, world):
        super().__init__()
        starts = shard_starts(num_rows, world)
        self.rank, self.world = rank, world
        self.start = starts[rank]
        self.rows = starts[rank + 1] - starts[rank]
        self.register_buffer("boundaries", torch.tensor(starts[1:world], dtype=torch.long))
        self.weight = nn.Parameter(torch.randn(self.rows, dim) * 0.05)

    def owner_of(self, ids):
        return torch.bucketize(ids, self.boundaries)

    def forward(self, ids):
        if self.world == 1:
            return F.embedding(ids, self.weight)
        owner = self.owner_of(ids)
        order = torch.argsort(owner, stable=True)
        send_ids = ids[order]
        send_counts = torch.bincount(owner, minlength=self.world)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        send_split, recv_split = send_counts.tolist(), recv_counts.tolist()
        recv_ids = torch.empty(sum(recv_split), dtype=torch.long)
        dist.all_to_all_single(recv_ids, send_ids, recv_split, send_split)
        rows = F.embedding(recv_ids - self.start, self.weight)
        back = torch.empty(len(send_ids), rows.shape[1])
        back = dfn.all_to_all_single(back, rows, send_split, recv_split)
        out = torch.empty_like(back)
        out[order] = back
        return out


class TwoTower(nn.Module):
    def __init__(self, rank, world):
        super().__init__()
        self.user = nn.Embedding(NUM_USERS, DIM)
        self.items = RowShardedEmbedding(NUM_ITEMS, DIM, rank, world)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, users, items):
        u = self.proj(self.user(users))
        v = self.items(items)
        return u @ v.t()


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TwoTower(rank, world)
    for p in list(model.user.parameters()) + list(model.proj.parameters()):
        dist.broadcast(p.data, 0)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1234 + rank)
    for step in range(STEPS):
        users = torch.randint(0, NUM_USERS, (BATCH,), generator=gen)
        items = (users * 7 + torch.randint(0, 50, (BATCH,), generator=gen)) % NUM_ITEMS
        logits = model(users, items)
        loss = F.cross_entropy(logits, torch.arange(BATCH))
        opt.zero_grad()
        loss.backward()
        for p in list(model.user.parameters()) + list(model.proj.parameters()):
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
