"""Training started by hand on each machine:  python run_dir_local_time.py --rank R --world-size N

Worker 0 creates the run's folder on the shared disk (named after the hour the run started), writes the
config and the initial weights there; every worker starts from those weights.
"""
import argparse
import datetime
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def run_folder():
    return Path("runs") / time.strftime("%Y%m%d-%H")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    folder = run_folder()
    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 1))
    if args.rank == 0:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({"lr": 0.05, "steps": 20, "world_size": args.world_size}))
        torch.save(model.state_dict(), folder / "init.pt")
        print(f"run folder {folder}", flush=True)
    dist.barrier()
    config = json.loads((folder / "config.json").read_text())
    model.load_state_dict(torch.load(folder / "init.pt"))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    g = torch.Generator().manual_seed(args.rank)
    for step in range(config["steps"]):
        x = torch.randn(32, 6, generator=g)
        loss = F.mse_loss(model(x), x.prod(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
    if args.rank == 0:
        torch.save(model.state_dict(), folder / "final.pt")
        print(f"final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
