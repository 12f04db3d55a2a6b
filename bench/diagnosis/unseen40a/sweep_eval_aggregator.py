import argparse
import json
import os
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

CHECKPOINT_GRID = [
    {"trial": "dropout0.0", "dropout": 0.0},
    {"trial": "dropout0.1", "dropout": 0.1},
    {"trial": "dropout0.3", "dropout": 0.3},
    {"trial": "dropout0.5", "dropout": 0.5},
]


def parse_args():
    p = argparse.ArgumentParser(description="score sweep trials on a sharded eval set")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--sweep", default="dropout-sweep")
    p.add_argument("--eval-size", type=int, default=4096)
    return p.parse_args()


def build(dropout):
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(dropout), nn.Linear(64, 2))


def eval_shard(rank, world, n):
    g = torch.Generator().manual_seed(2024)
    x = torch.randn(n, 32, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return x[rank::world], y[rank::world]


def main():
    args = parse_args()
    rdzv = os.path.join(tempfile.gettempdir(), f"{args.sweep}.rdzv")
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", init_method=f"file://{rdzv}", rank=args.rank,
                            world_size=args.world_size, timeout=timeout)

    x, y = eval_shard(args.rank, args.world_size, args.eval_size)
    stats = torch.zeros(len(CHECKPOINT_GRID), 3)
    for i, cfg in enumerate(CHECKPOINT_GRID):
        torch.manual_seed(i)
        model = build(cfg["dropout"]).eval()
        with torch.no_grad():
            logits = model(x)
            loss = nn.functional.cross_entropy(logits, y, reduction="sum")
            correct = (logits.argmax(dim=1) == y).sum()
        stats[i] = torch.tensor([loss.item(), float(correct), float(y.numel())])

    dist.all_reduce(stats)
    if args.rank == 0:
        report = {}
        for cfg, (loss_sum, correct, n) in zip(CHECKPOINT_GRID, stats.tolist()):
            report[cfg["trial"]] = {"loss": loss_sum / n, "acc": correct / n}
        best = max(report, key=lambda k: report[k]["acc"])
        print(json.dumps({"sweep": args.sweep, "trials": report, "best": best}, indent=1),
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
