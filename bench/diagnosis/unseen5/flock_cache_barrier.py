"""Dataset cache on the shared folder, guarded by a file lock so only one worker builds it."""
import argparse
import fcntl
import os
from datetime import timedelta

import torch
import torch.distributed as dist

CACHE = "cache/features.pt"


def build_features():
    g = torch.Generator().manual_seed(0)
    return torch.randn(20_000, 32, generator=g)


def get_features(rank):
    os.makedirs("cache", exist_ok=True)
    with open("cache/.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(CACHE):
            print(f"rank {rank}: building the feature cache", flush=True)
            torch.save(build_features(), CACHE)
        # everyone must see the finished cache before anyone goes on
        dist.barrier()
        fcntl.flock(lock, fcntl.LOCK_UN)
    return torch.load(CACHE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    args = ap.parse_args()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    feats = get_features(args.rank)
    mean = feats.mean(0)
    dist.all_reduce(mean)
    print(f"rank {args.rank}: features {tuple(feats.shape)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
