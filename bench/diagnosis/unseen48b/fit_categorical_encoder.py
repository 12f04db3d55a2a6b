import os
import json
import datetime
import numpy as np
import torch
import torch.distributed as dist

N_ROWS = 6000
CAT_COLUMNS = ["store_type", "region_code", "promo_channel", "payment_kind"]
SMOOTHING = 20.0


def load_shard(rank, world):
    rng = np.random.default_rng(7)
    day = np.sort(rng.integers(0, 365, N_ROWS))
    store = rng.integers(0, 5, N_ROWS).astype(np.float64)
    region = rng.integers(0, 12, N_ROWS).astype(np.float64)
    promo = np.where(day >= 200, rng.integers(0, 6, N_ROWS), -1).astype(np.float64)
    promo[promo < 0] = np.nan
    payment = rng.integers(0, 3, N_ROWS).astype(np.float64)
    payment[rng.uniform(size=N_ROWS) < 0.05] = np.nan
    cats = np.stack([store, region, promo, payment], 1)
    sales = 10 + 2 * store + np.nan_to_num(promo, nan=0.0) + rng.normal(0, 1, N_ROWS)
    lo, hi = rank * N_ROWS // world, (rank + 1) * N_ROWS // world
    return cats[lo:hi], sales[lo:hi]


def global_cardinality(cats):
    local = torch.tensor([int(np.nanmax(cats[:, j])) + 1 for j in range(cats.shape[1])],
                         dtype=torch.int64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX)
    return local.tolist()


def target_encoding(cats, target, cards):
    tables = {}
    total = torch.tensor([target.sum(), float(target.size)], dtype=torch.float64)
    dist.all_reduce(total)
    prior = float(total[0] / total[1])
    for j, name in enumerate(CAT_COLUMNS):
        col = cats[:, j]
        seen = ~np.isnan(col)
        codes = col[seen].astype(np.int64)
        sums = torch.zeros(cards[j], dtype=torch.float64)
        counts = torch.zeros(cards[j], dtype=torch.float64)
        sums.index_add_(0, torch.from_numpy(codes), torch.from_numpy(target[seen]))
        counts.index_add_(0, torch.from_numpy(codes), torch.ones(codes.size, dtype=torch.float64))
        dist.all_reduce(sums)
        dist.all_reduce(counts)
        enc = (sums + SMOOTHING * prior) / (counts + SMOOTHING)
        tables[name] = {"values": enc.tolist(), "missing": prior, "counts": counts.tolist()}
    return tables


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    cats, sales = load_shard(rank, world)
    print(f"rank {rank}: {cats.shape[0]} rows", flush=True)
    cards = global_cardinality(cats)
    tables = target_encoding(cats, sales, cards)
    encoded = np.empty_like(cats)
    for j, name in enumerate(CAT_COLUMNS):
        values = np.asarray(tables[name]["values"])
        col = cats[:, j]
        encoded[:, j] = np.where(np.isnan(col), tables[name]["missing"],
                                 values[np.nan_to_num(col, nan=0).astype(np.int64)])
    check = torch.tensor([encoded.mean()], dtype=torch.float64)
    dist.all_reduce(check)
    if rank == 0:
        summary = {k: len(v["values"]) for k, v in tables.items()}
        print("encoder fitted:", json.dumps(summary), "mean", float(check) / world, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
