import argparse
import datetime
import json
import os

import numpy as np
import torch
import torch.distributed as dist

SCHEMA = [
    {"name": "age", "kind": "numeric", "bins": 10, "range": (0, 100)},
    {"name": "income", "kind": "numeric", "bins": 25, "range": (0, 250_000)},
    {"name": "session_len", "kind": "numeric", "bins": 40, "range": (0, 3600)},
    {"name": "clicks", "kind": "numeric", "bins": 16, "range": (0, 64)},
    {"name": "country", "kind": "categorical", "bins": 30, "range": (0, 30)},
    {"name": "device", "kind": "categorical", "bins": 4, "range": (0, 4)},
    {"name": "plan", "kind": "categorical", "bins": 6, "range": (0, 6)},
    {"name": "referrer", "kind": "categorical", "bins": 12, "range": (0, 12)},
]


def parse_args():
    p = argparse.ArgumentParser(description="global feature histograms for the preprocessing config")
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--drop", nargs="*", default=["referrer"])
    p.add_argument("--out", default="feature_stats.json")
    return p.parse_args()


def load_shard(rank, rows):
    rng = np.random.default_rng(7 + rank)
    cols = {}
    for spec in SCHEMA:
        lo, hi = spec["range"]
        if spec["kind"] == "numeric":
            cols[spec["name"]] = rng.uniform(lo, hi, size=rows)
        else:
            cols[spec["name"]] = rng.integers(lo, hi, size=rows)
    return cols


def local_histogram(values, spec):
    lo, hi = spec["range"]
    counts, _ = np.histogram(values, bins=spec["bins"], range=(lo, hi))
    return torch.from_numpy(counts.astype(np.int64))


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    specs = {s["name"]: s for s in SCHEMA}
    shard = load_shard(rank, args.rows // world)

    selected = {s["name"] for s in SCHEMA} - set(args.drop)
    stats = {}
    for name in selected:
        hist = local_histogram(shard[name], specs[name])
        dist.all_reduce(hist, op=dist.ReduceOp.SUM)
        stats[name] = hist

    if rank == 0:
        summary = {}
        for name in sorted(stats):
            hist = stats[name]
            total = int(hist.sum())
            summary[name] = {"bins": specs[name]["bins"], "total": total,
                             "mode_bin": int(hist.argmax()), "counts": hist.tolist()}
            assert total == (args.rows // world) * world, f"{name}: {total} rows"
        with open(args.out, "w") as f:
            json.dump(summary, f)
        print(f"wrote stats for {len(summary)} features", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
