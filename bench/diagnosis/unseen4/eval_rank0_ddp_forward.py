"""Train a small CNN with DDP; rank 0 runs the validation pass after every epoch (the others go on)."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()
torch.manual_seed(rank)

net = nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
model = DDP(net)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def validate(m):
    m.eval()
    correct = 0
    with torch.no_grad():
        for _ in range(20):
            x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
            correct += (m(x).argmax(1) == y).sum().item()
    m.train()
    return correct / 320


for epoch in range(3):
    for step in range(10):
        x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"epoch {epoch}: val acc {validate(model):.3f}", flush=True)
dist.barrier()
dist.destroy_process_group()
