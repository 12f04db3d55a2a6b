"""Data step: each rank scans its slice of an interaction log, marks which (user, item) edges exist, and the ranks merge their edge masks into one graph."""
import os
import datetime
import torch
import torch.distributed as dist

USERS = 50
ITEMS = 40


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def read_log_slice(rank, world):
    g = torch.Generator().manual_seed(99)
    users = torch.randint(0, USERS, (600,), generator=g)
    items = torch.randint(0, ITEMS, (600,), generator=g)
    per = 600 // world
    return users[rank * per:(rank + 1) * per], items[rank * per:(rank + 1) * per]


def edge_mask(users, items):
    idx = torch.stack([users, items])
    present = torch.ones(idx.shape[1], dtype=torch.bool)
    return torch.sparse_coo_tensor(idx, present, (USERS, ITEMS)).coalesce()


def main():
    rank, world = setup()
    users, items = read_log_slice(rank, world)
    mask = edge_mask(users, items)
    if world > 1:
        dist.all_reduce(mask)
    mask = mask.coalesce()
    edges = mask.indices()
    deg_user = torch.bincount(edges[0], minlength=USERS)
    deg_item = torch.bincount(edges[1], minlength=ITEMS)
    print(f"rank {rank}: {edges.shape[1]} unique edges, max user degree {int(deg_user.max())}, "
          f"cold items {int((deg_item == 0).sum())}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
