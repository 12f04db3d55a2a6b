"""Feature extraction job started on each node with lab exec (one process per node): each rank writes its
features to the node's scratch folder ($TMPDIR, the cluster's job-local scratch), then all ranks average stats."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn


def scratch_dir():
    return os.environ.get("TMPDIR", "/tmp")


def extract(rank, n=2000):
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16)).eval()
    gen = torch.Generator().manual_seed(rank)
    with torch.no_grad():
        return encoder(torch.randn(n, 32, generator=gen))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    feats = extract(args.rank)
    path = os.path.join(scratch_dir(), f"features_rank{args.rank}.pt")
    torch.save(feats, path)
    print(f"rank {args.rank}: wrote {tuple(feats.shape)} features", flush=True)
    stats = torch.stack([feats.mean(0), feats.std(0)])
    dist.all_reduce(stats)
    if args.rank == 0:
        print(f"mean of feature means {stats[0].mean().item() / args.world_size:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
