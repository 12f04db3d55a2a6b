"""Evaluate the intent classifier on the held-out set, one shard per rank, and write a merged report."""
import argparse
import json
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


def build_test_set(n, dim, num_classes):
    g = torch.Generator().manual_seed(1234)
    centers = torch.randn(num_classes, dim, generator=g) * 2.0
    labels = torch.arange(n) % num_classes
    feats = centers[labels] + torch.randn(n, dim, generator=g)
    return feats, labels


class Classifier(nn.Module):
    def __init__(self, dim, num_classes):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 64), nn.GELU(), nn.Linear(64, num_classes))

    def forward(self, x):
        return self.net(x)


def gather_across_ranks(t):
    world = dist.get_world_size()
    out = [torch.zeros_like(t)] * world
    dist.all_gather(out, t)
    return torch.cat(out, dim=0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--num-examples", type=int, default=1200)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--report", default="eval_report.json")
    args = p.parse_args()

    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = Classifier(args.dim, args.num_classes).eval()
    feats, labels = build_test_set(args.num_examples, args.dim, args.num_classes)

    per_rank = args.num_examples // world
    ids = torch.arange(rank * per_rank, (rank + 1) * per_rank)

    preds = []
    with torch.no_grad():
        for start in range(0, len(ids), args.batch_size):
            batch_ids = ids[start:start + args.batch_size]
            logits = model(feats[batch_ids])
            preds.append(logits.argmax(dim=-1))
    local_preds = torch.cat(preds)
    print(f"rank {rank}: scored {len(local_preds)} examples "
          f"(ids {ids[0].item()}..{ids[-1].item()})", flush=True)

    all_ids = gather_across_ranks(ids)
    all_preds = gather_across_ranks(local_preds)

    if rank == 0:
        total = per_rank * world
        merged = np.full(total, -1, dtype=np.int64)
        merged[all_ids.numpy()] = all_preds.numpy()
        missing = np.flatnonzero(merged < 0)
        if len(missing):
            raise RuntimeError(f"merged predictions are incomplete: {len(missing)} of {total} "
                               f"examples have no prediction (first missing id {missing[0]})")
        acc = float((merged == labels[:total].numpy()).mean())
        per_class = {int(c): float((merged[labels[:total].numpy() == c] == c).mean())
                     for c in range(args.num_classes)}
        with open(args.report, "w") as f:
            json.dump({"examples": total, "accuracy": acc, "per_class": per_class}, f, indent=2)
        print(f"accuracy {acc:.4f} over {total} examples -> {args.report}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
