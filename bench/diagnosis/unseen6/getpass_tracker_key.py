"""DDP training that reports metrics to the team's experiment tracker from rank 0; torchrun, gloo, CPU."""
import datetime
import getpass
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Tracker:
    """Minimal client of the experiment tracker: records go to a local spool the tracker agent uploads."""

    def __init__(self, project):
        key = os.environ.get("TRACKER_API_KEY")
        if not key:
            key = getpass.getpass(f"API key for project {project!r}: ")
        self.spool = Path("tracker-spool") / project
        self.spool.mkdir(parents=True, exist_ok=True)
        self.auth = key[:4] + "..."

    def log(self, step, **metrics):
        with open(self.spool / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\n")


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    tracker = Tracker("churn-model") if rank == 0 else None
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(40):
        x = torch.randn(64, 24, generator=g)
        y = (x[:, 0] + x[:, 1] > 0).long()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if tracker is not None and step % 10 == 0:
            tracker.log(step, loss=loss.item())
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
