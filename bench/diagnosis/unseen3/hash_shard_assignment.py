"""Each rank trains on the shard files it owns; ownership is decided by hashing the file name."""
import datetime
import os
from collections import Counter

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_FILES = 64


def list_shards():
    return [f"shards/train-{i:05d}-of-{NUM_FILES:05d}.jsonl" for i in range(NUM_FILES)]


def owned_by(rank, world, files):
    return [f for f in files if hash(f) % world == rank]


def check_assignment(files, world):
    """Every file must be read by exactly one rank per epoch."""
    mine = owned_by(dist.get_rank(), world, files)
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    owners = Counter(f for assigned in everyone for f in assigned)
    shared = sorted(f for f, n in owners.items() if n > 1)
    orphans = sorted(set(files) - set(owners))
    if shared or orphans:
        raise RuntimeError(f"shard assignment is broken: {len(shared)} files assigned to several ranks, "
                           f"{len(orphans)} to none (per rank: {[len(a) for a in everyone]})")
    return mine


def load_file(name):
    g = torch.Generator().manual_seed(int(name.split("-")[1]))
    x = torch.randn(50, 16, generator=g)
    return x, (x.sum(dim=1, keepdim=True) > 0).float()


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = check_assignment(list_shards(), world)
    print(f"rank {rank}: {len(mine)} shard files", flush=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for name in mine:
        x, y = load_file(name)
        loss = F.binary_cross_entropy_with_logits(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), "sharded.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
