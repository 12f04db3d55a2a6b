"""Distributed evaluation of an intent classifier: balanced accuracy and per-class recall over the eval set."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn

INTENTS = ["greeting", "billing", "cancel", "upgrade", "outage", "refund", "password", "other"]
EMB = 32


def load_eval_set():
    """Eval examples come grouped by intent, one file per intent, read in order."""
    feats, labels = [], []
    for c, _name in enumerate(INTENTS):
        g = torch.Generator().manual_seed(40 + c)
        n = 30 + 7 * c
        centre = torch.randn(EMB, generator=g) * 2.0
        feats.append(centre + torch.randn(n, EMB, generator=g))
        labels.append(torch.full((n,), c, dtype=torch.long))
    return torch.cat(feats), torch.cat(labels)


def build_model():
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(EMB, 64), nn.ReLU(), nn.Linear(64, len(INTENTS))).eval()


def shard(x, y, rank, world):
    per = math.ceil(x.size(0) / world)
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def per_class_recall(pred, target):
    recalls = {}
    for c, name in enumerate(INTENTS):
        support = int((target == c).sum())
        hits = int(((pred == c) & (target == c)).sum())
        recalls[name] = hits / support
    return recalls


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    x, y = load_eval_set()
    xs, ys = shard(x, y, rank, world)
    model = build_model()
    with torch.no_grad():
        pred = model(xs).argmax(dim=1)

    recalls = per_class_recall(pred, ys)
    local = torch.tensor([recalls[n] for n in INTENTS], dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.SUM)
    local /= world

    if rank == 0:
        for name, r in zip(INTENTS, local.tolist()):
            print(f"recall[{name}] = {r:.3f}", flush=True)
        print(f"balanced accuracy = {local.mean().item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
