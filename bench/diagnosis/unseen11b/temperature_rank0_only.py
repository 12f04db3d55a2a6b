"""Distillation-style student with an annealed softmax temperature; at the end all ranks must agree on a probe batch."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5))
        self.temperature = 4.0

    def forward(self, x):
        return self.body(x) / self.temperature


def anneal(step, total):
    return 4.0 - 3.0 * step / total


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(100 + rank)
    model = DDP(Student())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    teacher = torch.randn(12, 5)
    steps = 60
    for step in range(steps):
        x = torch.randn(32, 12)
        target = torch.softmax(x @ teacher, dim=-1)
        opt.zero_grad()
        loss = -(target * torch.log_softmax(model(x), dim=-1)).sum(-1).mean()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} T {model.module.temperature:.2f}", flush=True)
            model.module.temperature = anneal(step + 10, steps)
    probe = torch.ones(4, 12)
    with torch.no_grad():
        out = model.module(probe)
    outs = [torch.zeros_like(out) for _ in range(world)]
    dist.all_gather(outs, out)
    spread = max((o - outs[0]).abs().max().item() for o in outs)
    print(f"rank {rank} probe spread {spread:.5f}", flush=True)
    if spread > 1e-5:
        raise RuntimeError(f"replica check failed: ranks give different outputs on the probe batch (max diff {spread:.4f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
