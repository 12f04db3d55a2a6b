"""Multi-label tagger: 8 independent yes/no tags per sample.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... manual_bce_nan.py
"""
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

TAGS = 8


def binary_cross_entropy(logits, target):
    p = torch.sigmoid(logits)
    return -(target * torch.log(p) + (1 - target) * torch.log(1 - p)).mean()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    truth = torch.randn(24, TAGS)
    model = DDP(nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, TAGS)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(400):
        x = torch.randn(128, 24, generator=g)
        y = (x @ truth > 0).float()
        loss = binary_cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss = mean_loss.item() / dist.get_world_size()
        if not math.isfinite(mean_loss):
            print(f"rank {rank}: mean loss is {mean_loss} at step {step}; stopping", flush=True)
            dist.destroy_process_group()
            raise SystemExit(1)
        if step % 50 == 0 and rank == 0:
            print(f"step {step}: loss {mean_loss:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
