"""Nightly quality check of a sharded dense index: approximate search vs exact.

Each rank holds one shard of the index and searches it with a coarse int8-quantised
copy; the per-rank candidate scores are gathered and merged. Rank 0 also computes
exact neighbours for a small probe set as the reference for recall@k.
"""
import datetime
import os

import torch
import torch.distributed as dist

SHARD = 3000
DIM = 48
PROBES = 64
K = 5


def shard_vectors(rank):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(SHARD, DIM, generator=g)


def quantise(x):
    scale = x.abs().amax(dim=1, keepdim=True) / 127
    return torch.round(x / scale).to(torch.int8), scale


def exact_reference(queries, shard):
    """Exact top-k on the probe set; double precision so ties are stable."""
    torch.set_default_dtype(torch.float64)
    q = torch.as_tensor(queries, dtype=torch.get_default_dtype())
    s = torch.as_tensor(shard, dtype=torch.get_default_dtype())
    return (q @ s.T).topk(K, dim=1).indices


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    shard = shard_vectors(rank)
    g = torch.Generator().manual_seed(5)
    queries = torch.randn(PROBES, DIM, generator=g)

    reference = exact_reference(queries, shard) if rank == 0 else None

    codes, scale = quantise(shard)
    approx = queries @ (codes.float() * scale).T
    top = approx.topk(K, dim=1)

    scores = torch.zeros(PROBES, K)
    scores.copy_(top.values)
    gathered = [torch.zeros(PROBES, K) for _ in range(world)]
    dist.all_gather(gathered, scores)
    merged = torch.cat(gathered, dim=1).topk(K, dim=1).values

    if rank == 0:
        local_hits = (top.indices[:, :, None] == reference[:, None, :]).any(-1).float().mean()
        print(f"shard0 recall@{K}: {local_hits:.3f}; best merged score {merged.max():.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
