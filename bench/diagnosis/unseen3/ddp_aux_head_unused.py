"""Classifier with a deep-supervision auxiliary head, trained with DDP.

The auxiliary loss is only computed every AUX_EVERY steps: it is a regulariser and costs a second head pass.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

AUX_EVERY = 2
AUX_WEIGHT = 0.3
STEPS = 20


class Net(nn.Module):
    def __init__(self, features=32, hidden=64, classes=10):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)
        self.aux_head = nn.Linear(hidden, classes)

    def forward(self, x, with_aux=False):
        h = self.backbone(x)
        logits = self.head(h)
        aux = self.aux_head(h) if with_aux else None
        return logits, aux


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + rank)
    for step in range(STEPS):
        x = torch.randn(16, 32, generator=data)
        y = torch.randint(0, 10, (16,), generator=data)
        logits, aux = model(x, with_aux=(step % AUX_EVERY == 0))
        loss = F.cross_entropy(logits, y)
        if aux is not None:
            loss = loss + AUX_WEIGHT * F.cross_entropy(aux, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "aux_classifier.pt")
        print("saved aux_classifier.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
