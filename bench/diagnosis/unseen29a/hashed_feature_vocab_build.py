import json
import os
import zlib
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

FIELDS = ["country", "device", "app_version", "category", "brand"]
ROWS_PER_RANK = 3000


def raw_rows(rank):
    rng = np.random.default_rng(42 + rank)
    sizes = {"country": 60, "device": 12, "app_version": 40, "category": 300, "brand": 900}
    return [{f: f"{f}_{int(rng.zipf(1.4)) % sizes[f]}" for f in FIELDS} for _ in range(ROWS_PER_RANK)]


def hash_feature(field, value):
    return zlib.crc32(f"{field}={value}".encode()) & 0x7FFFFFFF


def hashed_ids(rows):
    return torch.tensor([[hash_feature(f, r[f]) for f in FIELDS] for r in rows], dtype=torch.long)


def build_vocab(local_ids, world):
    local_sorted = torch.unique(local_ids)
    parts = [None] * world
    dist.all_gather_object(parts, local_sorted)
    merged = torch.cat(parts)
    keep = torch.ones_like(merged, dtype=torch.bool)
    keep[1:] = merged[1:] != merged[:-1]
    return merged[keep]


def remap(vocab, ids):
    rows = torch.searchsorted(vocab, ids).clamp(max=len(vocab) - 1)
    missing = vocab[rows] != ids
    if missing.any():
        bad = ids[missing][0].item()
        raise KeyError(f"hashed feature id {bad} not in vocabulary of {len(vocab)} ids")
    return rows


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    ids = hashed_ids(raw_rows(rank))
    vocab = build_vocab(ids.flatten(), world)
    rows = remap(vocab, ids)
    table = torch.nn.Embedding(len(vocab), 16)
    pooled = table(rows).sum(dim=1)
    stats = torch.tensor([float(len(vocab)), pooled.norm(dim=1).mean().item()])
    dist.all_reduce(stats)
    if rank == 0:
        print(json.dumps({"vocab_size": len(vocab), "mean_pooled_norm": stats[1].item() / world}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
