"""Trainer following the linear scaling rule (lr grows with the number of processes); the config builder and
the optimizer factory come from two different code bases."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

BASE = {"lr": 0.01, "batch_size": 32, "steps": 60, "momentum": 0.9}


def build_config(world):
    cfg = dict(BASE)
    cfg["lr"] = BASE["lr"] * world                # linear scaling rule for the global batch
    cfg["global_batch"] = BASE["batch_size"] * world
    return cfg


def build_optimizer(params, cfg, world):
    # "scale the learning rate with the number of workers" (kept from the single-node recipe)
    return torch.optim.SGD(params, lr=cfg["lr"] * world, momentum=cfg["momentum"])


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = build_config(world)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = build_optimizer(model.parameters(), cfg, world)
    g = torch.Generator().manual_seed(rank)
    w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(99))
    for step in range(cfg["steps"]):
        x = torch.randn(cfg["batch_size"], 16, generator=g)
        loss = nn.functional.mse_loss(model(x), x @ w_true)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4g}", flush=True)
    final = loss.item()
    if not math.isfinite(final) or final > 1.0:
        raise SystemExit(f"rank {rank}: training did not converge: final loss {final:.4g} after {cfg['steps']} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
