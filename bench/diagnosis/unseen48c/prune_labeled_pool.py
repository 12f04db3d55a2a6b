import os
import datetime
import torch
import torch.distributed as dist

PER_RANK = 300
FEAT = 12
BUDGET = 20
ROUNDS = 3


def build_pool(rank, world):
    g = torch.Generator().manual_seed(77 + rank)
    feats = torch.randn(PER_RANK, FEAT, generator=g)
    return {rank * PER_RANK + i: feats[i] for i in range(PER_RANK)}


def k_center_round(pool, centers, rank, world):
    ids = list(pool.keys())
    feats = torch.stack([pool[i] for i in ids])
    dmin = torch.cdist(feats, centers).min(dim=1).values
    k = min(BUDGET, len(ids))
    vals, pos = dmin.topk(k)
    cand = torch.stack([vals, torch.tensor([float(ids[p]) for p in pos.tolist()])], dim=1)
    parts = [torch.zeros_like(cand) for _ in range(world)]
    dist.all_gather(parts, cand)
    merged = torch.cat(parts)
    order = merged[:, 0].argsort(descending=True)[:BUDGET]
    return [int(v) for v in merged[order, 1].tolist()]


def share_features(pool, chosen, world):
    local = torch.zeros(len(chosen), FEAT)
    for j, gid in enumerate(chosen):
        if gid in pool:
            local[j] = pool[gid]
    dist.all_reduce(local)
    return local


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    pool = build_pool(rank, world)
    centers = torch.zeros(1, FEAT)
    labeled = []
    for rnd in range(ROUNDS):
        chosen = k_center_round(pool, centers, rank, world)
        new_feats = share_features(pool, chosen, world)
        centers = torch.cat([centers, new_feats])
        labeled.extend(chosen)
        for gid in chosen:
            del pool[gid]
        if rank == 0:
            print(f"round {rnd}: labeled {len(labeled)}, pool shard {len(pool)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
