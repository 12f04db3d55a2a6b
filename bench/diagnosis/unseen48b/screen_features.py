import os
import json
import datetime
import numpy as np
import torch
import torch.distributed as dist

N_ROWS = 5000
COLUMNS = ["monthly_spend", "tenure_months", "tier_discount", "support_calls",
           "seats", "late_payments"]


def load_shard(rank, world):
    rng = np.random.default_rng(11)
    tier = np.sort(rng.choice(3, N_ROWS, p=[0.6, 0.25, 0.15]))
    spend = rng.gamma(2.0, 30.0, N_ROWS) * (1 + tier)
    tenure = rng.integers(1, 72, N_ROWS).astype(np.float64)
    discount = np.where(tier == 0, 0.0, rng.choice([0.05, 0.1, 0.15], N_ROWS))
    calls = rng.poisson(1.5, N_ROWS).astype(np.float64)
    seats = rng.integers(1, 50, N_ROWS).astype(np.float64)
    late = rng.poisson(0.3, N_ROWS).astype(np.float64)
    table = np.stack([spend, tenure, discount, calls, seats, late], 1)
    lo, hi = rank * N_ROWS // world, (rank + 1) * N_ROWS // world
    return table[lo:hi]


def informative_columns(table):
    keep = []
    for j, name in enumerate(COLUMNS):
        if np.ptp(table[:, j]) > 0:
            keep.append(j)
    return keep


def column_moments(table, keep):
    sub = torch.from_numpy(np.ascontiguousarray(table[:, keep]))
    moments = torch.stack([sub.sum(0), (sub ** 2).sum(0), sub.min(0).values.neg(), sub.max(0).values])
    sums = moments[:2].contiguous()
    extremes = moments[2:].contiguous()
    n = torch.tensor([float(sub.shape[0])], dtype=torch.float64)
    dist.all_reduce(sums)
    dist.all_reduce(extremes, op=dist.ReduceOp.MAX)
    dist.all_reduce(n)
    mean = sums[0] / n
    var = sums[1] / n - mean ** 2
    return mean, var.clamp_min(0).sqrt(), -extremes[0], extremes[1]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    table = load_shard(rank, dist.get_world_size())
    keep = informative_columns(table)
    print(f"rank {rank}: {table.shape[0]} rows, {len(keep)} informative columns", flush=True)
    mean, std, lo, hi = column_moments(table, keep)
    report = {}
    for k, j in enumerate(keep):
        report[COLUMNS[j]] = {"mean": round(float(mean[k]), 4), "std": round(float(std[k]), 4),
                              "min": float(lo[k]), "max": float(hi[k]),
                              "cv": round(float(std[k] / mean[k]), 4) if mean[k] else None}
    if rank == 0:
        with open("feature_screen.json", "w") as fh:
            json.dump(report, fh, indent=2)
        print(json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
