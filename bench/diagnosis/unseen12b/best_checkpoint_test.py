"""Train with DDP, keep the best checkpoint by validation loss, then test the best weights on every rank.

Started by hand on each machine: python best_checkpoint_test.py --rank R --world-size N (MASTER_ADDR/PORT set).
The checkpoint carries the run's config and numpy RNG state next to the weights, so it is a full pickle: it is
our own file, so it is loaded with weights_only=False.
"""
import argparse
import dataclasses
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclasses.dataclass
class TrainConfig:
    hidden: int = 64
    lr: float = 3e-3
    epochs: int = 4
    steps_per_epoch: int = 25


def batches(seed, n, rank):
    rng = np.random.default_rng(seed * 100 + rank)
    w = np.linspace(-1, 1, 16)
    for _ in range(n):
        x = rng.normal(size=(64, 16)).astype(np.float32)
        y = (x @ w > 0).astype(np.int64)
        yield torch.from_numpy(x), torch.from_numpy(y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size, timeout=timeout)
    rank = dist.get_rank()
    cfg = TrainConfig()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    best_path = os.path.join(os.getcwd(), "best.pt")
    best = float("inf")
    for epoch in range(cfg.epochs):
        model.train()
        for x, y in batches(epoch, cfg.steps_per_epoch, rank):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            val = torch.tensor([sum(F.cross_entropy(model(x), y).item() for x, y in batches(1000, 5, rank)) / 5])
        dist.all_reduce(val, op=dist.ReduceOp.AVG)
        print(f"rank {rank} epoch {epoch} val loss {val.item():.4f}", flush=True)
        if val.item() < best:
            best = val.item()
            if rank == 0:
                torch.save({"model": model.module.state_dict(), "epoch": epoch, "val": best, "config": cfg,
                            "numpy_rng": np.random.get_state()}, best_path)
        dist.barrier()

    # test the best weights, each rank on its own share of the test set
    ckpt = torch.load(best_path, map_location="cpu", weights_only=False)
    model.module.load_state_dict(ckpt["model"])
    correct = torch.zeros(2)
    with torch.no_grad():
        for x, y in batches(2000, 10, rank):
            correct += torch.tensor([(model(x).argmax(1) == y).sum().item(), y.numel()])
    dist.all_reduce(correct)
    if rank == 0:
        print(f"best epoch {ckpt['epoch']}: test accuracy {correct[0] / correct[1]:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
