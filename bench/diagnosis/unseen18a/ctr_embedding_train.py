import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

NUM_USERS, NUM_ITEMS, DIM = 5000, 2000, 16


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.users = nn.Embedding(NUM_USERS, DIM, sparse=True)
        self.items = nn.Embedding(NUM_ITEMS, DIM, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(2 * DIM, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, u, i):
        return self.mlp(torch.cat([self.users(u), self.items(i)], dim=1)).squeeze(1)


class GradientSync:
    def __init__(self, model, bucket_mb=4):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.bucket_bytes = bucket_mb * 1024 * 1024
        self.world = dist.get_world_size()

    def _buckets(self):
        bucket, size = [], 0
        for p in self.params:
            if p.grad is None:
                continue
            bucket.append(p.grad)
            size += p.grad.numel() * p.grad.element_size()
            if size >= self.bucket_bytes:
                yield bucket
                bucket, size = [], 0
        if bucket:
            yield bucket

    def sync(self):
        if self.world == 1:
            return
        for grads in self._buckets():
            flat = _flatten_dense_tensors(grads)
            dist.all_reduce(flat)
            flat /= self.world
            for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
                g.copy_(synced)


def batches(rank, steps, bs):
    gen = torch.Generator().manual_seed(7 + rank)
    for _ in range(steps):
        u = torch.randint(0, NUM_USERS, (bs,), generator=gen)
        i = torch.randint(0, NUM_ITEMS, (bs,), generator=gen)
        y = ((u + i) % 3 == 0).float()
        yield u, i, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = TwoTower()
    sparse_opt = torch.optim.SparseAdam(list(model.users.parameters()) + list(model.items.parameters()), lr=0.01)
    dense_opt = torch.optim.Adam(model.mlp.parameters(), lr=0.001)
    sync = GradientSync(model)
    loss_fn = nn.BCEWithLogitsLoss()

    for step, (u, i, y) in enumerate(batches(rank, steps=30, bs=256)):
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss = loss_fn(model(u, i), y)
        loss.backward()
        sync.sync()
        sparse_opt.step()
        dense_opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} bce {loss.item():.4f}", flush=True)

    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
