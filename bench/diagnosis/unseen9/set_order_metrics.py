"""Evaluation that sums several metric tensors across ranks; the metrics to sync are collected in a set so
that one requested twice is synced once."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

CLASSES = 6


@torch.no_grad()
def evaluate(model, rank):
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(300, 10, generator=g)
    y = x[:, :CLASSES].argmax(1)
    pred = model(x).argmax(1)
    confusion = torch.zeros(CLASSES, CLASSES)
    confusion.index_put_((y, pred), torch.ones(len(y)), accumulate=True)
    return {
        "confusion": confusion,
        "per_class_correct": confusion.diag().clone(),
        "per_class_total": confusion.sum(1),
        "seen": torch.tensor([float(len(y))]),
        "loss_sum": torch.tensor([nn.functional.cross_entropy(model(x), y, reduction="sum").item()]),
        "top2": torch.tensor([float((model(x).topk(2).indices == y[:, None]).any(1).sum())]),
    }


def sync(metrics, names):
    for name in set(names):
        dist.all_reduce(metrics[name])
    return metrics


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, CLASSES)).eval()
    wanted = ["seen", "confusion", "per_class_correct", "per_class_total", "loss_sum", "top2", "seen"]
    m = sync(evaluate(model, rank), wanted)
    if rank == 0:
        acc = m["per_class_correct"].sum() / m["seen"]
        print(f"accuracy {acc.item():.3f} loss {(m['loss_sum'] / m['seen']).item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
