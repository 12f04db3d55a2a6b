"""Train a small MLP that forecasts the next hour of grid load from the previous day.

Each rank owns a contiguous slice of substations; the inputs are z-scored with
statistics over the whole fleet so that every replica sees the same scaling.
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

LAGS = 24
HORIZON = 1
STATIONS_PER_RANK = 3
HOURS = 24 * 90


def substation_series(station):
    rng = np.random.default_rng(1000 + station)
    t = np.arange(HOURS)
    base = 4.2e5 + 3.0 * station
    load = base + 40.0 * np.sin(2 * np.pi * t / 24) + 15.0 * np.sin(2 * np.pi * t / 168) + rng.normal(0, 4.0, HOURS)
    temp = 12.0 + 8.0 * np.sin(2 * np.pi * (t - 15) / 24) + rng.normal(0, 0.5, HOURS)
    return np.stack([load, temp], axis=1).astype(np.float32)


def fleet_moments(local, world):
    if world == 1:
        return local.mean(dim=0), local.std(dim=0)
    n = torch.tensor([float(local.shape[0])])
    s = local.sum(dim=0)
    sq = (local * local).sum(dim=0)
    for t in (n, s, sq):
        dist.all_reduce(t)
    mean = s / n
    var = sq / n - mean * mean
    return mean, var.sqrt()


def make_windows(series, mean, std):
    z = (series - mean) / std
    xs, ys = [], []
    for start in range(0, z.shape[0] - LAGS - HORIZON, 6):
        xs.append(z[start:start + LAGS].reshape(-1))
        ys.append(z[start + LAGS:start + LAGS + HORIZON, 0])
    return torch.stack(xs), torch.stack(ys)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    stations = range(rank * STATIONS_PER_RANK, (rank + 1) * STATIONS_PER_RANK)
    raw = [torch.from_numpy(substation_series(s)) for s in stations]
    mean, std = fleet_moments(torch.cat(raw), world)
    if rank == 0:
        print(f"fleet mean {mean.tolist()} std {std.tolist()}", flush=True)

    pairs = [make_windows(r, mean, std) for r in raw]
    x = torch.cat([p[0] for p in pairs])
    y = torch.cat([p[1] for p in pairs])

    model = DDP(torch.nn.Sequential(torch.nn.Linear(LAGS * 2, 64), torch.nn.ReLU(), torch.nn.Linear(64, HORIZON)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        perm = torch.randperm(x.shape[0])
        total = 0.0
        for i in range(0, x.shape[0] - 63, 64):
            idx = perm[i:i + 64]
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite loss {loss.item()} at epoch {epoch} batch {i // 64}")
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} loss {total:.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
