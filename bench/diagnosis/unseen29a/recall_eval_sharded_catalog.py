import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F


def parse():
    p = argparse.ArgumentParser(description="recall@k of a two-tower checkpoint over a sharded catalog")
    p.add_argument("--num-items", type=int, default=360)
    p.add_argument("--queries-per-rank", type=int, default=256)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--k", type=int, default=100)
    return p.parse_args()


def synthetic_towers(num_items, dim):
    g = torch.Generator().manual_seed(1234)
    items = F.normalize(torch.randn(num_items, dim, generator=g), dim=1)
    proj = torch.randn(dim, dim, generator=g) * 0.3 + torch.eye(dim)
    return items, proj


def local_catalog(items, rank, world):
    ids = torch.arange(items.shape[0])
    shard_ids = torch.tensor_split(ids, world)[rank]
    return shard_ids, items[shard_ids]


def encode_queries(items, proj, n, rank):
    g = torch.Generator().manual_seed(99 + rank)
    target = torch.randint(0, items.shape[0], (n,), generator=g)
    noise = 0.4 * torch.randn(n, items.shape[1], generator=g)
    q = F.normalize((items[target] + noise) @ proj, dim=1)
    return q, target


def main():
    args = parse()
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    items, proj = synthetic_towers(args.num_items, args.dim)
    shard_ids, shard_emb = local_catalog(items, rank, world)
    item_vecs = F.normalize(shard_emb @ proj, dim=1)

    hits = torch.zeros(1)
    total = torch.zeros(1)
    for q_block, tgt_block in zip(*[t.split(64) for t in encode_queries(items, proj, args.queries_per_rank, rank)]):
        all_q = [torch.empty_like(q_block) for _ in range(world)]
        dist.all_gather(all_q, q_block)
        all_q = torch.cat(all_q)
        scores = all_q @ item_vecs.T
        top_s, top_i = scores.topk(args.k, dim=1)
        top_ids = shard_ids[top_i]
        gathered_s = [torch.empty_like(top_s) for _ in range(world)]
        gathered_i = [torch.empty_like(top_ids) for _ in range(world)]
        dist.all_gather(gathered_s, top_s)
        dist.all_gather(gathered_i, top_ids)
        merged_s = torch.cat(gathered_s, dim=1)
        merged_i = torch.cat(gathered_i, dim=1)
        best = merged_s.topk(args.k, dim=1).indices
        final_ids = merged_i.gather(1, best)
        mine = slice(rank * q_block.shape[0], (rank + 1) * q_block.shape[0])
        hits += (final_ids[mine] == tgt_block[:, None]).any(dim=1).sum()
        total += q_block.shape[0]

    dist.all_reduce(hits)
    dist.all_reduce(total)
    if rank == 0:
        print(f"recall@{args.k} = {(hits / total).item():.4f} over {int(total.item())} queries, {args.num_items} items")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
