"""Compute per-column mean/std of a sharded CSV feature table for normalization.

The table is exported as fixed-size CSV parts (rows_per_part rows each, the last
part holding the remainder). Parts are split contiguously across ranks; each rank
accumulates count, sum and sum of squares, and the totals are all-reduced.
"""
import datetime
import json
import os

import numpy as np
import torch
import torch.distributed as dist

N_ROWS = 1537
ROWS_PER_PART = 512
COLUMNS = ["age_days", "clicks", "dwell_s", "n_tokens", "score"]


def export_parts(out_dir):
    rng = np.random.default_rng(7)
    table = rng.normal(loc=[300, 12, 40, 800, 0.5], scale=[90, 4, 15, 200, 0.2],
                       size=(N_ROWS, len(COLUMNS)))
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for i, start in enumerate(range(0, N_ROWS, ROWS_PER_PART)):
        path = os.path.join(out_dir, f"features-{i:03d}.csv")
        np.savetxt(path, table[start:start + ROWS_PER_PART], delimiter=",",
                   header=",".join(COLUMNS), comments="", fmt="%.6f")
        paths.append(path)
    return paths


def partial_stats(paths):
    count, total, total_sq = 0, None, None
    for path in paths:
        rows = np.loadtxt(path, delimiter=",", skiprows=1)
        s, sq = rows.sum(axis=0), (rows ** 2).sum(axis=0)
        count += rows.shape[0]
        total = s if total is None else total + s
        total_sq = sq if total_sq is None else total_sq + sq
    return np.hstack([count, total, total_sq]).astype(np.float64)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    parts = export_parts("features_csv")
    mine = [parts[i] for i in np.array_split(np.arange(len(parts)), world)[rank]]

    stats = torch.from_numpy(partial_stats(mine))
    dist.all_reduce(stats)

    k = len(COLUMNS)
    n = stats[0].item()
    mean = stats[1:1 + k] / n
    std = (stats[1 + k:] / n - mean ** 2).clamp_min(0).sqrt()
    if rank == 0:
        with open("normalizer.json", "w") as f:
            json.dump({c: {"mean": m, "std": s} for c, m, s in
                       zip(COLUMNS, mean.tolist(), std.tolist())}, f, indent=1)
        print(f"normalizer over {int(n)} rows written", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
