"""Train a sentiment scorer with DDP and keep the best epoch's weights; torchrun, gloo, CPU.
main() reports the best epoch for the sweep driver that parses the log."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def data(seed, n):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 40, generator=g)
    return x, (x[:, :10].sum(1) > 0).float()


def validate(model, x, y):
    with torch.no_grad():
        loss = nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(-1), y)
    total = torch.tensor([loss.item()])
    dist.all_reduce(total, op=dist.ReduceOp.AVG)
    return total.item()


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    x, y = data(rank, 1024)
    vx, vy = data(100 + rank, 256)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(40, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    best_loss, best_epoch = float("inf"), -1
    for epoch in range(6):
        for xb, yb in zip(x.split(64), y.split(64)):
            opt.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(model(xb).squeeze(-1), yb).backward()
            opt.step()
        val = validate(model, vx, vy)
        if val < best_loss:
            best_loss, best_epoch = val, epoch
            if rank == 0:
                torch.save(model.module.state_dict(), "best.pt")
        if rank == 0:
            print(f"epoch {epoch}: validation loss {val:.4f}", flush=True)
    if rank == 0:
        print(f"best epoch {best_epoch} (validation loss {best_loss:.4f})", flush=True)
    dist.destroy_process_group()
    return best_epoch


if __name__ == "__main__":
    sys.exit(main())
