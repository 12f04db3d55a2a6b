"""Builds a vocabulary from per-rank token caches, then merges the counts."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

VOCAB = 5000


def build_cache(rank, path):
    g = torch.Generator().manual_seed(rank)
    tokens = torch.randint(0, VOCAB, (200_000,), generator=g)
    torch.save(tokens, path)
    return tokens


def load_tokens(rank):
    path = f"cache/tokens_{rank}.pt"
    try:
        return torch.load(path)
    except FileNotFoundError:
        print(f"rank {rank}: no cache at {path}, rebuilding", flush=True)
        tokens = build_cache(rank, path)
        dist.barrier()  # wait until every rank has its cache before counting
        return tokens


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    os.makedirs("cache", exist_ok=True)
    if rank == 0 and not os.path.exists("cache/tokens_0.pt"):
        build_cache(0, "cache/tokens_0.pt")   # the preprocessing job only ran for shard 0
    tokens = load_tokens(rank)
    counts = torch.bincount(tokens, minlength=VOCAB).float()
    dist.all_reduce(counts)
    keep = int((counts >= 5).sum())
    print(f"rank {rank}: vocabulary of {keep} tokens", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
