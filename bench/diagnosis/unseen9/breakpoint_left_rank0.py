"""Trainer with a debugging stop left in the validation code of the main rank."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def validate(model, rank):
    with torch.no_grad():
        x = torch.randn(64, 8)
        out = model.module(x)
        err = (out - x.sum(1, keepdim=True)).abs().mean()
    if rank == 0 and err > 0.5:
        breakpoint()  # look at out / err when validation is bad
    err = err.reshape(1)
    dist.all_reduce(err, op=dist.ReduceOp.AVG)
    return err.item()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(4):
        for _ in range(10):
            x = torch.randn(32, 8)
            loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = validate(model, rank)
        if rank == 0:
            print(f"epoch {epoch} val_err {val:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
