"""Fine-tune the head of a small network: the backbone is frozen, only trainable parameters go to the optimizer.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... trainable_filter_consumed.py
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def build_model():
    backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    for p in backbone.parameters():
        p.requires_grad_(False)
    return nn.Sequential(backbone, nn.Linear(64, 5))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(build_model())

    trainable = filter(lambda p: p.requires_grad, model.parameters())
    total = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"parameters: {total} total, {sum(p.numel() for p in trainable)} trainable", flush=True)
    opt = torch.optim.AdamW(trainable, lr=1e-3, weight_decay=0.01)

    g = torch.Generator().manual_seed(rank)
    for step in range(50):
        x = torch.randn(64, 32, generator=g)
        y = x[:, :5].argmax(1)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"final loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
