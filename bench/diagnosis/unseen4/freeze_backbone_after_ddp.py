"""Fine-tune: train everything for one epoch, then freeze the backbone and train only the head."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank = dist.get_rank()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        return self.head(self.backbone(x))


torch.manual_seed(0)
model = DDP(Net())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(3):
    if epoch == 1:  # warm-up done: freeze the backbone
        for p in model.module.backbone.parameters():
            p.requires_grad = False
    for step in range(5):
        x, y = torch.randn(16, 32), torch.randint(0, 5, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: epoch {epoch} loss {loss.item():.3f}", flush=True)
dist.destroy_process_group()
