"""DDP training with a per-epoch time budget, so that a stuck epoch cannot burn the whole allocation."""
import datetime
import os
import signal
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 3
STEPS_PER_EPOCH = 20
EPOCH_BUDGET_S = 6


def fetch_batch(g):
    time.sleep(0.4)  # reading and decoding a batch from the dataset bucket
    x = torch.randn(32, 16, generator=g)
    return x, x.mean(1, keepdim=True)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(EPOCHS):
        started = time.monotonic()
        signal.alarm(EPOCH_BUDGET_S)
        for _ in range(STEPS_PER_EPOCH):
            x, y = fetch_batch(g)
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        signal.alarm(0)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} in {time.monotonic() - started:.1f} s", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "budgeted.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
