"""Refresh the coarse quantizer (IVF centroids) of a sharded passage index.

Every rank holds one shard of passage embeddings and the current centroids from the
last index build. Rank 0 retrains the centroids on a sample, sends them to the other
ranks, and every rank reassigns its shard to the new lists.
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist

DIM = 64
NLIST = 32
SHARD_ROWS = 4000


def init():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def write_previous_build(rank, workdir):
    """Stand-in for the artefacts the last nightly build left on each host."""
    os.makedirs(workdir, exist_ok=True)
    g = np.random.default_rng(1234)
    np.save(os.path.join(workdir, "centroids.npy"), g.standard_normal((NLIST, DIM)).astype(np.float32))
    g = np.random.default_rng(rank)
    np.save(os.path.join(workdir, f"shard{rank}.npy"), g.standard_normal((SHARD_ROWS, DIM)).astype(np.float32))


def load_build(rank, workdir):
    shard = np.load(os.path.join(workdir, f"shard{rank}.npy"), mmap_mode="r")
    centroids = np.load(os.path.join(workdir, "centroids.npy"), mmap_mode="r")
    return torch.from_numpy(shard), torch.from_numpy(centroids)


def kmeans(x, k, iters=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    c = x[torch.randperm(x.shape[0], generator=g)[:k]].clone()
    for _ in range(iters):
        assign = torch.cdist(x, c).argmin(dim=1)
        for j in range(k):
            members = x[assign == j]
            if len(members):
                c[j] = members.mean(dim=0)
    return c


def main():
    rank, world = init()
    workdir = os.path.abspath(f"ivf_build_r{rank}")
    write_previous_build(rank, workdir)
    shard, centroids = load_build(rank, workdir)

    sample = shard[torch.randperm(shard.shape[0])[:1000]].clone()
    gathered = [torch.empty_like(sample) for _ in range(world)]
    dist.all_gather(gathered, sample)

    if rank == 0:
        centroids = kmeans(torch.cat(gathered), NLIST)
    dist.broadcast(centroids, src=0)

    assign = torch.cdist(shard, centroids).argmin(dim=1)
    sizes = torch.bincount(assign, minlength=NLIST)
    dist.all_reduce(sizes)
    if rank == 0:
        print(f"refreshed {NLIST} lists over {world} shards; largest list {int(sizes.max())}, "
              f"smallest {int(sizes.min())}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
