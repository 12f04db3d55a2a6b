"""Exact-hash dedup, step 1: hash every document of this rank's shard and build a compact index.

Each rank hashes its documents (sha1 of normalised text), keeps the first copy of every digest,
and records a cluster-wide document uid so later steps can point back into any shard.
The index is kept as an int32 tensor to halve its size on disk.
"""
import datetime
import hashlib
import json
import os

import torch
import torch.distributed as dist

DOCS_PER_RANK = 4000


def make_shard(rank, n):
    g = torch.Generator().manual_seed(1234 + rank)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    docs = []
    for i in range(n):
        k = int(torch.randint(0, 600, (1,), generator=g))
        docs.append(" ".join(words[(k + j) % len(words)] for j in range(6)) + f" #{k}")
    return docs


def normalise(text):
    return " ".join(text.lower().split())


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = make_shard(rank, DOCS_PER_RANK)
    first_seen = {}
    for i, text in enumerate(docs):
        d = hashlib.sha1(normalise(text).encode()).hexdigest()
        first_seen.setdefault(d, i)

    digests = sorted(first_seen)
    uids = [(rank << 32) | first_seen[d] for d in digests]
    prefix = [int(d[:7], 16) for d in digests]
    index = torch.stack([
        torch.tensor(prefix, dtype=torch.int32),
        torch.tensor(uids, dtype=torch.int32),
    ], dim=1)

    counts = torch.tensor([len(docs), index.shape[0]], dtype=torch.int64)
    dist.all_reduce(counts)
    torch.save(index, f"exact_index.rank{rank}.pt")
    if rank == 0:
        summary = {"docs": int(counts[0]), "unique_local": int(counts[1]), "world": world}
        print(json.dumps(summary))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
