"""Train a small regressor with DDP; metrics go to a run tracker, training stops early on a validation plateau."""
import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class RunTracker:
    """Tiny experiment tracker: keeps the metric history and appends JSON lines to the run's log file."""

    def __init__(self, run_dir, enabled):
        self.enabled = enabled
        self.history = {}
        self.path = os.path.join(run_dir, "metrics.jsonl")
        if enabled:
            os.makedirs(run_dir, exist_ok=True)

    def log(self, step, **metrics):
        if not self.enabled:
            return
        for key, value in metrics.items():
            self.history.setdefault(key, []).append(float(value))
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, "time": time.time(), **metrics}) + "\n")

    def last(self, key):
        values = self.history.get(key)
        return values[-1] if values else None


class EarlyStopping:
    def __init__(self, monitor="val_loss", patience=3, min_delta=1e-4):
        self.monitor, self.patience, self.min_delta = monitor, patience, min_delta
        self.best, self.wait = float("inf"), 0

    def should_stop(self, tracker):
        current = tracker.last(self.monitor)
        if current is not None and current < self.best - self.min_delta:
            self.best, self.wait = current, 0
        else:
            self.wait += 1
        return self.wait >= self.patience


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.linspace(-1, 1, 16)
    y = x @ w + 0.05 * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--run-dir", default="runs/regressor")
    args = parser.parse_args()

    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    x, y = make_data(2048, seed=1)
    x, y = x[rank::world], y[rank::world]
    vx, vy = make_data(512, seed=2)
    vx, vy = vx[rank::world], vy[rank::world]

    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = RunTracker(args.run_dir, enabled=(rank == 0))
    stopper = EarlyStopping(patience=args.patience)
    loss_fn = nn.MSELoss()

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for i in range(0, len(x), 64):
            opt.zero_grad()
            loss = loss_fn(model(x[i:i + 64]), y[i:i + 64])
            loss.backward()
            opt.step()
            step += 1
        model.eval()
        with torch.no_grad():
            stats = torch.tensor([loss_fn(model(vx), vy).item() * len(vx), float(len(vx))])
        dist.all_reduce(stats)
        val_loss = (stats[0] / stats[1]).item()
        tracker.log(step, epoch=epoch, train_loss=loss.item(), val_loss=val_loss)
        if rank == 0:
            print(f"epoch {epoch}: val_loss {val_loss:.5f}", flush=True)
        if stopper.should_stop(tracker):
            print(f"rank {rank}: early stop at epoch {epoch}", flush=True)
            break

    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(args.run_dir, "final.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
