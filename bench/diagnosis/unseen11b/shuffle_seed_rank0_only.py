"""Shard-file training: the shard list is shuffled and split across ranks; a coverage audit checks the split."""
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist

SEED = 1234


def setup(rank):
    if rank == 0:
        print(f"run config: seed={SEED} shards=64", flush=True)
        random.seed(SEED)
        torch.manual_seed(SEED)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    setup(rank)
    shards = [f"train-{i:05d}.tar" for i in range(64)]
    random.shuffle(shards)
    mine = shards[rank::world]
    seen = [None] * world
    dist.all_gather_object(seen, mine)
    covered = {s for part in seen for s in part}
    twice = sum(len(part) for part in seen) - len(covered)
    print(f"rank {rank}: {len(mine)} shards, first {mine[:2]}", flush=True)
    if len(covered) != len(shards):
        raise RuntimeError(f"coverage audit failed: the epoch covers {len(covered)} of {len(shards)} shards, "
                           f"{twice} assigned to two ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
