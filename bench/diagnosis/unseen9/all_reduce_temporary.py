"""Evaluation helper: counts predictions per class on every rank and sums them across ranks."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CLASSES = 5
N_EVAL = 1000


def eval_set():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N_EVAL, 10, generator=g)
    return TensorDataset(x, (x[:, :CLASSES]).argmax(1))


@torch.no_grad()
def class_histogram(model, loader):
    counts = torch.zeros(CLASSES, dtype=torch.long)
    for x, _ in loader:
        counts += torch.bincount(model(x).argmax(1), minlength=CLASSES)
    # sum across ranks (gloo's all_reduce is happier with floats)
    dist.all_reduce(counts.float())
    return counts


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, CLASSES)).eval()
    data = eval_set()
    loader = DataLoader(data, batch_size=50, sampler=DistributedSampler(data, shuffle=False))
    hist = class_histogram(model, loader)
    total = int(hist.sum())
    if rank == 0:
        print("predicted classes:", hist.tolist(), flush=True)
    if total != N_EVAL:
        raise SystemExit(f"rank {rank}: histogram covers {total} predictions, expected {N_EVAL}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
