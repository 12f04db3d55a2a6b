"""Trainer that checks, before training, that every rank loaded the same config (an all_gather of a digest)."""
import datetime
import hashlib
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CONFIG = {"model": "mlp-3x64", "lr": 0.01, "batch_size": 32, "steps": 40, "seed": 17}


def digest(cfg):
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]


def configs_agree(cfg):
    """True when every rank holds the same config."""
    seen = [None] * dist.get_world_size()
    dist.all_gather_object(seen, digest(cfg))
    return len(set(seen)) == 1


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    assert configs_agree(CONFIG), "ranks disagree on the config"
    torch.manual_seed(CONFIG["seed"])
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])
    g = torch.Generator().manual_seed(rank)
    for step in range(CONFIG["steps"]):
        x = torch.randn(CONFIG["batch_size"], 16, generator=g)
        loss = nn.functional.mse_loss(model(x), x[:, :4].sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
