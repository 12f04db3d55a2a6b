"""Evaluate the fraud scorer on the holdout month: every rank scores its block of the
holdout and the ranks report ROC AUC and log loss."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def init():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def holdout(n=4000, features=12):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, features, generator=g)
    hour = torch.arange(n) * 24.0 / n
    risk = x[:, 0] * 1.5 + x[:, 1] - 1.0 + (hour > 12).float() * 2.5
    y = ((risk > 2.8) & (hour > 12)).float()
    return x, y


def roc_auc(scores, labels):
    pos = labels.sum().item()
    neg = labels.numel() - pos
    if pos == 0 or neg == 0:
        raise ValueError("Only one class present in y_true. ROC AUC score is not defined in that case.")
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=scores.dtype)
    return ((ranks[labels == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)).item()


def main():
    rank, world_size = init()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    x, y = holdout()
    per_rank = x.shape[0] // world_size
    lo, hi = rank * per_rank, (rank + 1) * per_rank
    x_local, y_local = x[lo:hi], y[lo:hi]
    with torch.no_grad():
        scores = model(x_local).squeeze(1)
    loss = F.binary_cross_entropy_with_logits(scores, y_local, reduction="sum")
    auc = roc_auc(scores, y_local)
    print(f"rank {rank}: {hi - lo} rows, positives {int(y_local.sum())}, auc {auc:.4f}", flush=True)
    summary = torch.tensor([auc, loss.item(), float(hi - lo)])
    dist.all_reduce(summary)
    if rank == 0:
        print(f"holdout AUC {summary[0].item() / world_size:.4f} "
              f"log loss {summary[1].item() / summary[2].item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
