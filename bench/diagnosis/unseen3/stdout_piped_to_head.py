"""Training started by hand on each machine:  python stdout_piped_to_head.py --rank R --world-size N

Worker 0 logs every step; the other workers log a summary per epoch.
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(args.rank)
    for epoch in range(args.epochs):
        for step in range(args.steps):
            x = torch.randn(32, 10, generator=g)
            loss = F.mse_loss(model(x), x.sum(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if args.rank == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}", flush=True)
        print(f"worker {args.rank}: epoch {epoch} done", flush=True)
    if args.rank == 0:
        torch.save(model.module.state_dict(), "piped.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
