"""DDP training with hard-example mining: every sample's loss is logged and the log goes into the checkpoint.

The log is a persistent linked list (a new record points at the previous head), so snapshots taken at any step
stay valid without copying.
"""
import datetime
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# torch.save of the loss log raised "maximum recursion depth exceeded while pickling an object"
sys.setrecursionlimit(1_000_000)

SAMPLES = 60_000
BATCH = 1_000


@dataclass(frozen=True)
class LossRecord:
    sample: int
    loss: float
    prev: "LossRecord | None"


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    x_all = torch.randn(SAMPLES, 10, generator=g)
    y_all = x_all[:, :2].sum(1, keepdim=True)
    log = None
    for epoch in range(2):
        for start in range(0, SAMPLES, BATCH):
            x, y = x_all[start:start + BATCH], y_all[start:start + BATCH]
            per_sample = F.mse_loss(model(x), y, reduction="none").squeeze(1)
            opt.zero_grad()
            per_sample.mean().backward()
            opt.step()
            for offset, value in enumerate(per_sample.detach().tolist()):
                log = LossRecord(start + offset, value, log)
        if rank == 0:
            print(f"epoch {epoch}: loss {per_sample.mean().item():.4f}; saving checkpoint", flush=True)
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "loss_log": log}, "mining.pt")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
