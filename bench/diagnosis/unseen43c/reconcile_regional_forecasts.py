"""Bottom-up hierarchical reconciliation of store-level demand forecasts.

Stores are dealt to ranks round-robin. Each rank forecasts its stores with a
seasonal-naive + drift model; regional totals are then summed inside one
process group per region (the ranks that hold that region's stores) and the
store forecasts are rescaled so they add up to the reconciled regional total.
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist

N_STORES = 12
REGIONS = {"north": [0, 1, 2, 3], "south": [4, 5, 6, 7], "coast": [8, 9, 10, 11]}
SEASON = 7
HORIZON = 14
DAYS = 7 * 40


def store_history(store):
    rng = np.random.default_rng(store)
    t = np.arange(DAYS)
    level = 200 + 15 * store
    weekly = 1 + 0.25 * np.sin(2 * np.pi * t / SEASON)
    return torch.tensor(level * weekly + 0.05 * t + rng.normal(0, 6, DAYS), dtype=torch.float32)


def seasonal_naive_drift(y):
    drift = (y[-1] - y[0]) / (y.numel() - 1)
    last_season = y[-SEASON:]
    reps = (HORIZON + SEASON - 1) // SEASON
    base = last_season.repeat(reps)[:HORIZON]
    return base + drift * torch.arange(1, HORIZON + 1, dtype=torch.float32)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    owner = {s: s % world for s in range(N_STORES)}
    mine = [s for s in range(N_STORES) if owner[s] == rank]
    forecasts = {s: seasonal_naive_drift(store_history(s)) for s in mine}
    print(f"rank {rank}: forecast {len(mine)} stores", flush=True)

    region_groups = {}
    for name, stores in REGIONS.items():
        members = sorted(owner[s] for s in stores)
        region_groups[name] = (members, dist.new_group(ranks=members))

    reconciled = {}
    for name, stores in REGIONS.items():
        members, group = region_groups[name]
        local = [forecasts[s] for s in stores if s in forecasts]
        total = torch.stack(local).sum(0) if local else torch.zeros(HORIZON)
        if rank in members:
            dist.all_reduce(total, group=group)
        top_down = total * 0.98
        share = {s: forecasts[s] / total for s in stores if s in forecasts}
        for s, w in share.items():
            reconciled[s] = w * top_down

    err = torch.zeros(1)
    for s in mine:
        err += (reconciled[s] - forecasts[s]).abs().mean()
    dist.all_reduce(err)
    if rank == 0:
        print(f"mean adjustment per store: {err.item() / N_STORES:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
