"""Classifier evaluation with bootstrapped 95% confidence intervals.
Each rank scores its slice of the test set; the resampling seed is derived from the run name
so every rank draws the same bootstrap indices over the gathered predictions."""
import os
import argparse
import datetime
import hashlib
import json

import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist

N_TEST = 512
N_FEAT = 16
N_CLASSES = 4


def make_test_set():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N_TEST, N_FEAT, generator=g)
    w = torch.randn(N_FEAT, N_CLASSES, generator=g)
    y = (x @ w + 0.5 * torch.randn(N_TEST, N_CLASSES, generator=g)).argmax(1)
    return x, y


def run_seed(run_name, split):
    digest = hashlib.sha256(f"{run_name}:{split}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def shared_seed(run_name, split, rank, world):
    if world == 1:
        return run_seed(run_name, split)
    if rank == 0:
        t = torch.tensor([run_seed(run_name, split)], dtype=torch.int64)
    else:
        t = torch.zeros(1, dtype=torch.int64)
    dist.broadcast(t, src=0)
    return int(t.item())


def bootstrap_ci(correct, seed, n_boot=1000, alpha=0.05):
    rng = np.random.default_rng(seed)
    n = len(correct)
    stats = np.empty(n_boot)
    for b in range(n_boot):
        stats[b] = correct[rng.integers(0, n, n)].mean()
    return float(np.quantile(stats, alpha / 2)), float(np.quantile(stats, 1 - alpha / 2))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run-name", default="release-eval")
    p.add_argument("--split", default="test")
    args = p.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    seed = shared_seed(args.run_name, args.split, rank, world)
    torch.manual_seed(seed)

    x, y = make_test_set()
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(N_FEAT, 32), nn.ReLU(), nn.Linear(32, N_CLASSES)).eval()
    idx = torch.arange(rank, N_TEST, world)
    with torch.no_grad():
        pred = model(x[idx]).argmax(1)
    correct = (pred == y[idx]).to(torch.float32)

    gathered = [torch.zeros_like(correct) for _ in range(world)]
    dist.all_gather(gathered, correct)
    all_correct = torch.cat(gathered).numpy()

    lo, hi = bootstrap_ci(all_correct, seed)
    if rank == 0:
        row = {"run": args.run_name, "split": args.split, "n": int(all_correct.size),
               "accuracy": float(all_correct.mean()), "ci95": [lo, hi]}
        with open("bootstrap_results.json", "w") as f:
            json.dump(row, f, indent=2)
        print(json.dumps(row))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
