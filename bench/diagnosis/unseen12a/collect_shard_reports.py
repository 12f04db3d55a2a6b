"""Offline evaluation over a sharded test set: ranks 1..N-1 each score one shard and send their confusion matrix
to rank 0, which writes a per-shard report (shard sizes differ) and the job-wide accuracy."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

CLASSES = 10


def shard_size(rank, world):
    return 60_000 * (world - rank)  # the shards were cut by date: older shards are larger


def score_shard(rank, world, model):
    g = torch.Generator().manual_seed(rank)
    confusion = torch.zeros(CLASSES, CLASSES)
    remaining = shard_size(rank, world)
    with torch.no_grad():
        while remaining:
            n = min(remaining, 4096)
            x = torch.randn(n, 256, generator=g)
            y = x[:, :CLASSES].argmax(1)
            pred = model(x).argmax(1)
            confusion.index_put_((y, pred), torch.ones(n), accumulate=True)
            remaining -= n
    return confusion


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, CLASSES))
    dist.barrier()
    if rank != 0:
        dist.send(score_shard(rank, world, model), dst=0)
    else:
        reports = {}
        for src in range(1, world):
            confusion = torch.empty(CLASSES, CLASSES)
            dist.recv(confusion)
            reports[src] = confusion
        for src, confusion in sorted(reports.items()):
            seen, expected = int(confusion.sum().item()), shard_size(src, world)
            print(f"shard {src}: {seen} samples, accuracy {confusion.diag().sum().item() / seen:.4f}", flush=True)
            if seen != expected:
                raise ValueError(f"shard {src} report covers {seen} samples, the shard has {expected}")
        total = sum(reports.values())
        with open("eval_report.json", "w") as f:
            json.dump({"accuracy": total.diag().sum().item() / total.sum().item(),
                       "per_shard": {s: c.tolist() for s, c in reports.items()}}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
