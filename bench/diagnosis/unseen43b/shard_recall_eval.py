"""Offline recall@K evaluation with user histories sharded across ranks.

Query users are spread over ranks by the data loader, but a user's history
(the items to exclude and the held-out positives) lives on rank user_id % world.
Queries are shipped to the history owner, scored there, and per-shard hit
counts are summed at the end.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

NUM_USERS = 6000
NUM_ITEMS = 3000
DIM = 16
K = 20
QUERIES_PER_RANK = 1500


def build_histories(rank, world):
    g = torch.Generator().manual_seed(11)
    held_out = torch.randint(0, NUM_ITEMS, (NUM_USERS,), generator=g)
    mine = torch.arange(rank, NUM_USERS, world)
    return {int(u): int(held_out[u]) for u in mine}


def item_table():
    g = torch.Generator().manual_seed(5)
    return torch.randn(NUM_ITEMS, DIM, generator=g)


def ship_queries(users, vecs, world):
    owner = users % world
    order = torch.argsort(owner, stable=True)
    counts = torch.histc(owner.float(), bins=world, min=0, max=world - 1)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)
    send, recv = counts.tolist(), recv_counts.tolist()
    recv_users = torch.empty(int(sum(recv)), dtype=torch.long)
    dist.all_to_all_single(recv_users, users[order], recv, send)
    recv_vecs = torch.empty(int(sum(recv)), DIM)
    dist.all_to_all_single(recv_vecs, vecs[order].contiguous(), recv, send)
    return recv_users, recv_vecs


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    histories = build_histories(rank, world)
    items = item_table()
    g = torch.Generator().manual_seed(900 + rank)
    users = torch.randint(0, NUM_USERS, (QUERIES_PER_RANK,), generator=g)
    user_vecs = torch.randn(QUERIES_PER_RANK, DIM, generator=g)
    if world > 1:
        users, user_vecs = ship_queries(users, user_vecs, world)
    scores = user_vecs @ items.t()
    topk = scores.topk(K, dim=1).indices
    target = torch.tensor([histories[int(u)] for u in users])
    hits = (topk == target[:, None]).any(dim=1).sum()
    totals = torch.stack([hits, torch.tensor(len(users))]).double()
    dist.all_reduce(totals)
    if rank == 0:
        print(f"recall@{K} = {totals[0] / totals[1]:.4f} over {int(totals[1])} queries", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
