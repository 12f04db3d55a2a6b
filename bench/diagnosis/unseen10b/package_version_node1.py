"""Intent classifier evaluated with the team's evalkit package (macro F1, padding label -1 ignored).

Launch on every node: torchrun --nnodes 2 --nproc-per-node 1 ... package_version_node1.py
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import evalkit

PAD = -1
CLASSES = 4


def batches(rank, n=20):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(n):
        x = torch.randn(32, 12, generator=g)
        y = x[:, :CLASSES].argmax(1)
        y[-4:] = PAD                      # padded rows at the end of each batch
        yield x, y


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, CLASSES)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        model.train()
        for x, y in batches(rank):
            loss = nn.functional.cross_entropy(model(x), y, ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            x, y = next(batches(rank + 10, 1))
            f1 = evalkit.macro_f1(model(x).argmax(1), y, num_classes=CLASSES, ignore_index=PAD)
        score = torch.tensor([f1])
        dist.all_reduce(score)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f} macro-F1 {score.item() / dist.get_world_size():.3f}",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
