"""Predict a sensor's drift from raw telemetry with DDP; inputs are standardised with statistics over ALL ranks' data.

Each rank reads its own slice of the telemetry; the global mean and standard deviation of every feature are
computed in one pass (count, sum, sum of squares, all-reduced), so no rank has to see the whole table.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES = ["unix_time_s", "pressure_pa", "temperature_c", "humidity_pct"]


def load_slice(rank, world, n=4096):
    """This rank's rows of one day of telemetry: time stamps a second apart, pressure around 101 kPa."""
    g = torch.Generator().manual_seed(11 + rank)
    t = 1_764_115_200 + torch.arange(rank, n * world, world, dtype=torch.float64)[:n]
    pressure = 101_325 + 40 * torch.randn(n, generator=g, dtype=torch.float64)
    temperature = 21 + 3 * torch.randn(n, generator=g, dtype=torch.float64)
    humidity = 45 + 10 * torch.rand(n, generator=g, dtype=torch.float64)
    x = torch.stack([t, pressure, temperature, humidity], dim=1).float()
    drift = 1.0 * (t - 1_764_115_200) / 3600 + 0.01 * (pressure - 101_325) + 0.3 * (temperature - 21)
    return x, drift.float()


def global_standardize(x):
    stats = torch.stack([torch.full((x.size(1),), float(x.size(0))), x.sum(0), (x * x).sum(0)])
    dist.all_reduce(stats)
    count, total, total_sq = stats
    mean = total / count
    std = (total_sq / count - mean * mean).sqrt()
    return (x - mean) / std, mean, std


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = load_slice(rank, world)
    x, mean, std = global_standardize(x)
    if rank == 0:
        print("feature mean", [f"{m:.6g}" for m in mean.tolist()], flush=True)
        print("feature std ", [f"{s:.6g}" for s in std.tolist()], flush=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(len(FEATURES), 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(300):
        idx = torch.randint(0, x.size(0), (128,))
        loss = F.mse_loss(model(x[idx]).squeeze(-1), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    with torch.no_grad():
        final = torch.tensor([F.mse_loss(model(x).squeeze(-1), y).item()])
    dist.all_reduce(final, op=dist.ReduceOp.AVG)
    baseline = y.var().item()
    print(f"rank {rank} final mse {final.item():.4f} (predicting the mean: {baseline:.4f})", flush=True)
    if not torch.isfinite(final).all() or final.item() > 0.1 * baseline:
        raise SystemExit(f"rank {rank}: model did not fit the drift: mse {final.item()} vs variance {baseline:.4f}")
    dist.barrier()


if __name__ == "__main__":
    try:
        main()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
