"""DDP training that checkpoints the best epoch and reloads it for the final evaluation."""
import argparse
import datetime
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", default="checkpoints")
    return parser.parse_args()


def evaluate(model, g):
    with torch.no_grad():
        x = torch.randn(256, 12, generator=g)
        return F.mse_loss(model(x), x[:, :3].sum(1, keepdim=True)).item()


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(rank)
    best = float("inf")
    for epoch in range(args.epochs):
        for _ in range(20):
            x = torch.randn(32, 12, generator=g)
            loss = F.mse_loss(model(x), x[:, :3].sum(1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = evaluate(model.module, torch.Generator().manual_seed(99))
        if rank == 0 and val < best:
            best = val
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "optimizer": opt.state_dict(),
                        "val_loss": val, "args": args}, out / "best.pt")
            print(f"epoch {epoch}: new best val loss {val:.4f}", flush=True)
        dist.barrier()

    checkpoint = torch.load(out / "best.pt", map_location="cpu")
    model.module.load_state_dict(checkpoint["model"])
    final = evaluate(model.module, torch.Generator().manual_seed(123))
    if rank == 0:
        print(f"best epoch {checkpoint['epoch']}: test loss {final:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
