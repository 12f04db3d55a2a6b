"""Train a DDP classifier on precomputed embeddings kept in one .npy file on the shared disk.

The file is memory-mapped so that every rank shares the page cache instead of holding its own copy, and the
features are standardised in place for the same reason (no second copy of the table).
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def precompute(path, n=20000, dim=128):
    """The embedding table the feature-extraction job left on the shared disk (synthetic here)."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, n)
    centers = rng.normal(size=(4, dim)) * 2
    feats = (centers[labels] + rng.normal(size=(n, dim)) + 5.0).astype(np.float32)
    np.save(path + ".feats.npy", feats)
    np.save(path + ".labels.npy", labels)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    base = os.path.join(os.getcwd(), "embeddings")
    if rank == 0:
        precompute(base)
    dist.barrier()
    feats = torch.from_numpy(np.load(base + ".feats.npy", mmap_mode="r"))
    labels = torch.from_numpy(np.load(base + ".labels.npy"))
    mean, std = feats.mean(0), feats.std(0)
    feats.sub_(mean).div_(std)  # standardise in place: no second copy of the table
    print(f"rank {rank}: features standardised, {tuple(feats.shape)}", flush=True)

    mine = torch.arange(rank, feats.size(0), world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(feats.size(1), 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(100):
        idx = mine[torch.randint(0, mine.numel(), (128,))]
        loss = F.cross_entropy(model(feats[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
