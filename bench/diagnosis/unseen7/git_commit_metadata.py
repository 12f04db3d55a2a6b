"""DDP training that records the code version (git commit) in the run's metadata from the main process."""
import json
import os
import subprocess
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def code_version():
    commit = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    dirty = subprocess.run(["git", "diff", "--quiet"]).returncode != 0
    return {"commit": commit, "dirty": dirty}


def write_metadata(config):
    os.makedirs("outputs", exist_ok=True)
    with open("outputs/metadata.json", "w") as f:
        json.dump({"config": config, "code": code_version(), "world_size": dist.get_world_size()}, f, indent=2)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    config = {"lr": 0.03, "epochs": 3, "batch_size": 32}
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)))
    if rank == 0:
        write_metadata(config)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        for _ in range(10):
            x = torch.randn(config["batch_size"], 10)
            loss = nn.functional.mse_loss(model(x), x.mean(dim=1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
