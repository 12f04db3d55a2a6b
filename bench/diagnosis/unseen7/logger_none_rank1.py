"""DDP training with an experiment tracker that should only write from the main process."""
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Tracker:
    """A tiny stand-in for a wandb-style run: buffers metrics and writes them as JSON lines."""

    def __init__(self, project, config):
        os.makedirs("tracking", exist_ok=True)
        self.path = os.path.join("tracking", f"{project}-{int(time.time())}.jsonl")
        self.log({"config": config})

    def log(self, metrics, step=None):
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\n")


CONFIG = {"lr": 0.01, "hidden": 48, "steps": 30, "log_every": 5}


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    run = Tracker("ranker", CONFIG) if rank == 0 else None
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, CONFIG["hidden"]), nn.ReLU(), nn.Linear(CONFIG["hidden"], 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=CONFIG["lr"])
    g = torch.Generator().manual_seed(rank)
    for step in range(CONFIG["steps"]):
        x = torch.randn(64, 12, generator=g)
        loss = nn.functional.mse_loss(model(x), x[:, :3].sum(dim=1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % CONFIG["log_every"] == 0:
            run.log({"loss": loss.item(), "rank": rank}, step=step)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
