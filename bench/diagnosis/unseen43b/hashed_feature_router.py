"""Routes hashed categorical features to the rank that owns their key range.

Keys are 62-bit feature hashes; the key space is split into equal contiguous
ranges, one per rank, and every rank keeps a dynamic table for its own range.
"""
import hashlib
import os
from datetime import timedelta

import torch
import torch.distributed as dist

KEY_BITS = 62
KEY_MASK = (1 << KEY_BITS) - 1
DIM = 8
BATCH = 2048
STEPS = 8
FIELDS = ["country", "device", "app", "hour", "category"]


def feature_key(field, value):
    digest = hashlib.blake2b(f"{field}={value}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & KEY_MASK


def make_batch(step, rank):
    g = torch.Generator().manual_seed(step * 1000 + rank)
    vals = torch.randint(0, 500, (BATCH, len(FIELDS)), generator=g).tolist()
    keys = [feature_key(FIELDS[j], v) for row in vals for j, v in enumerate(row)]
    return torch.tensor(keys, dtype=torch.long)


class DynamicTable:
    def __init__(self, dim):
        self.dim = dim
        self.slots = {}
        self.weight = torch.empty(0, dim)

    def lookup(self, keys):
        idx = []
        new = 0
        for k in keys.tolist():
            if k not in self.slots:
                self.slots[k] = len(self.slots)
                new += 1
            idx.append(self.slots[k])
        if new:
            self.weight = torch.cat([self.weight, torch.randn(new, self.dim) * 0.01])
        return self.weight[torch.tensor(idx, dtype=torch.long)]


def owner_of(keys, world):
    return (keys * world) >> KEY_BITS


def route(keys, table, world):
    owner = owner_of(keys, world)
    order = torch.argsort(owner, stable=True)
    send_counts = torch.bincount(owner, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    s, r = send_counts.tolist(), recv_counts.tolist()
    recv_keys = torch.empty(sum(r), dtype=torch.long)
    dist.all_to_all_single(recv_keys, keys[order], r, s)
    rows = table.lookup(recv_keys)
    back = torch.empty(len(keys), table.dim)
    dist.all_to_all_single(back, rows, s, r)
    out = torch.empty_like(back)
    out[order] = back
    return out


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    table = DynamicTable(DIM)
    for step in range(STEPS):
        keys = make_batch(step, rank)
        emb = route(keys, table, world) if world > 1 else table.lookup(keys)
        pooled = emb.view(BATCH, len(FIELDS), DIM).sum(1)
        size = torch.tensor([len(table.slots)])
        dist.all_reduce(size)
        if rank == 0:
            print(f"step {step} pooled {pooled.abs().mean():.5f} keys held {size.item()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
