"""Trainer whose defaults can be overridden per user in ~/.config/trainer/defaults.json (like many CLIs)."""
import datetime
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

DEFAULTS = {"max_steps": 120, "lr": 0.01, "batch_size": 32, "log_every": 20}


def load_config():
    cfg = dict(DEFAULTS)
    user = Path.home() / ".config" / "trainer" / "defaults.json"
    if user.exists():
        cfg.update(json.loads(user.read_text()))
    return cfg


def main():
    cfg = load_config()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    g = torch.Generator().manual_seed(rank)
    for step in range(cfg["max_steps"]):
        x = torch.randn(cfg["batch_size"], 10, generator=g)
        loss = nn.functional.mse_loss(model(x), x.norm(dim=1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % cfg["log_every"] == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    print(f"rank {rank} finished {cfg['max_steps']} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
