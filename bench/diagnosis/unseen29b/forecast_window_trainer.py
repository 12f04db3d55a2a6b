import os
import datetime
import math
import torch
import torch.nn as nn
import torch.distributed as dist

LOOKBACK = 336
HORIZON = 48
DAYS = 60


def make_series(n_hours, n_vars=4):
    g = torch.Generator().manual_seed(7)
    t = torch.arange(n_hours, dtype=torch.float32)
    daily = torch.sin(2 * math.pi * t / 24).unsqueeze(1)
    weekly = torch.sin(2 * math.pi * t / 168).unsqueeze(1)
    noise = 0.1 * torch.randn(n_hours, n_vars, generator=g)
    return 10 + 3 * daily + weekly + noise


def local_span(series, rank, world):
    per_rank = series.shape[0] // world
    return series[rank * per_rank:(rank + 1) * per_rank]


def windows(series):
    span = series.unfold(0, LOOKBACK + HORIZON, 1)
    x = span[..., :LOOKBACK].transpose(1, 2)
    y = span[..., LOOKBACK:].transpose(1, 2)
    return x.contiguous(), y.contiguous()


class Forecaster(nn.Module):
    def __init__(self, n_vars):
        super().__init__()
        self.proj = nn.Linear(LOOKBACK, 128)
        self.head = nn.Linear(128, HORIZON)

    def forward(self, x):
        h = torch.relu(self.proj(x.transpose(1, 2)))
        return self.head(h).transpose(1, 2)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    series = make_series(24 * DAYS)
    mean = series.mean(0, keepdim=True)
    std = series.std(0, keepdim=True)
    series = (series - mean) / std

    shard = local_span(series, rank, world)
    x, y = windows(shard)
    print(f"rank {rank}: {x.shape[0]} windows from {shard.shape[0]} hours", flush=True)

    model = nn.parallel.DistributedDataParallel(Forecaster(series.shape[1]))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        perm = torch.randperm(x.shape[0])
        total = 0.0
        for i in range(0, x.shape[0], 32):
            idx = perm[i:i + 32]
            loss = nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        stat = torch.tensor([total])
        dist.all_reduce(stat)
        if rank == 0:
            print(f"epoch {epoch} loss {stat.item() / world:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
