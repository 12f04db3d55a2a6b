"""Feature normalisation for a tabular model: each rank computes per-feature sums over its shard once and caches
them as .npy next to the run; the job-wide mean/std come from an all_reduce of the cached sums, read back with
mmap so a re-run does not copy large statistics into memory."""
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

FEATURES = 4096


def shard(rank):
    rng = np.random.default_rng(rank)
    return rng.normal(loc=rank, scale=1.0 + rank, size=(2000, FEATURES)).astype(np.float32)


def cached_sums(rank, data):
    path = f"feature_sums.rank{rank}.npy"
    if not os.path.exists(path):
        np.save(path, np.stack([data.sum(0), (data ** 2).sum(0), np.full(FEATURES, len(data), np.float32)]))
    return np.load(path, mmap_mode="r")


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    data = shard(rank)
    sums = torch.from_numpy(cached_sums(rank, data))
    dist.all_reduce(sums)
    total, total_sq, count = sums[0], sums[1], sums[2]
    mean = total / count
    std = (total_sq / count - mean ** 2).sqrt()
    x = (torch.from_numpy(data) - mean) / std
    print(f"rank {rank}: normalised shard, mean of means {mean.mean().item():.3f}, "
          f"mean of stds {std.mean().item():.3f}, shard mean after {x.mean().item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
