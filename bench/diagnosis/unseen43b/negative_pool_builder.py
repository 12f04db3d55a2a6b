"""Builds a pool of popularity-sampled negatives for the ranking model.

Item feature vectors live on the rank that owns the item (item_id % world).
Each rank samples candidate negatives, asks the owners for their features and
writes a summary of the pool it built.
"""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

NUM_ITEMS = 50000
FEAT_DIM = 8
NEG_PER_ROUND = 4096
ROUNDS = 5


def local_item_features(rank, world):
    ids = torch.arange(rank, NUM_ITEMS, world)
    g = torch.Generator().manual_seed(7)
    feats = torch.randn(NUM_ITEMS, FEAT_DIM, generator=g)[ids]
    return ids, feats


def popularity(num_items):
    ranks = torch.arange(1, num_items + 1, dtype=torch.float64)
    return (1.0 / ranks) ** 0.75


def fetch_features(neg_ids, feats, world):
    owner = neg_ids % world
    order = torch.argsort(owner, stable=True)
    send_ids = neg_ids[order]
    send_counts = torch.bincount(owner, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    recv_ids = torch.empty_like(send_ids)
    dist.all_to_all_single(recv_ids, send_ids, recv_counts.tolist(), send_counts.tolist())
    rows = feats[recv_ids // world]
    back = torch.empty(len(send_ids), FEAT_DIM)
    dist.all_to_all_single(back, rows, send_counts.tolist(), recv_counts.tolist())
    out = torch.empty_like(back)
    out[order] = back
    return out


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    _, feats = local_item_features(rank, world)
    probs = popularity(NUM_ITEMS)
    gen = torch.Generator().manual_seed(100 + rank)
    pool_norms = []
    for rnd in range(ROUNDS):
        neg_ids = torch.multinomial(probs, NEG_PER_ROUND, replacement=True, generator=gen)
        if world > 1:
            neg_feats = fetch_features(neg_ids, feats, world)
        else:
            neg_feats = feats[neg_ids]
        pool_norms.append(neg_feats.norm(dim=1).mean().item())
        print(f"rank {rank} round {rnd} pool mean norm {pool_norms[-1]:.4f}", flush=True)
    stats = torch.tensor([sum(pool_norms) / len(pool_norms)])
    dist.all_reduce(stats, op=dist.ReduceOp.AVG)
    if rank == 0:
        with open("negative_pool_summary.json", "w") as f:
            json.dump({"world": world, "mean_norm": stats.item()}, f)
        print("pool summary written", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
