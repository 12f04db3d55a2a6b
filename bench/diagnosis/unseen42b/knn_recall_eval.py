"""Evaluate recall@k of a sharded brute-force nearest-neighbour index.

Each rank owns a contiguous block of the corpus embeddings. Queries are replicated;
every rank searches its block, the per-rank top-k lists are merged into a global
top-k, and recall@k is computed against planted positives.
"""
import datetime
import os

import torch
import torch.distributed as dist

N_DOCS = 8000
N_QUERIES = 256
DIM = 64
K = 10


def merge_topk(scores, ids, k):
    world = dist.get_world_size()
    all_scores = [torch.empty_like(scores) for _ in range(world)]
    all_ids = [torch.empty_like(ids) for _ in range(world)]
    dist.all_gather(all_scores, scores)
    dist.all_gather(all_ids, ids)
    s = torch.cat(all_scores, dim=1)
    i = torch.cat(all_ids, dim=1)
    best = s.topk(k, dim=1, largest=False)
    return torch.gather(i, 1, best.indices)


if __name__ == "__main__":
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    g = torch.Generator().manual_seed(7)
    corpus = torch.randn(N_DOCS, DIM, generator=g)
    positives = torch.randint(0, N_DOCS, (N_QUERIES,), generator=g)
    queries = corpus[positives] + 0.05 * torch.randn(N_QUERIES, DIM, generator=g)

    per = N_DOCS // world
    lo, hi = rank * per, (N_DOCS if rank == world - 1 else (rank + 1) * per)
    block = corpus[lo:hi]

    dist = torch.cdist(queries, block)
    local = dist.topk(K, dim=1, largest=False)
    local_ids = local.indices + lo

    if world > 1:
        top = merge_topk(local.values.contiguous(), local_ids.contiguous(), K)
    else:
        top = local_ids

    hits = (top == positives[:, None]).any(dim=1).float().mean().item()
    if rank == 0:
        print(f"recall@{K} over {world} shards: {hits:.4f}")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
