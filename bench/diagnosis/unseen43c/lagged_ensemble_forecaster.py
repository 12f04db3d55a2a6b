"""Deep ensemble of lag-feature forecasters for hourly sensor readings.

Every rank trains one ensemble member on a different lag set (bagging over
lag configurations); the members are then collected on every rank to form the
ensemble, which is scored on the shared validation week.
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.utils.parametrizations import weight_norm

LAG_SETS = [(1, 2, 3, 24, 168), (1, 24, 48, 168), (1, 2, 24, 25, 168), (1, 3, 12, 24, 72, 168)]
HOURS = 24 * 120
VALID = 24 * 7


def sensor():
    rng = np.random.default_rng(3)
    t = np.arange(HOURS)
    y = 20 + 5 * np.sin(2 * np.pi * t / 24) + 2 * np.sin(2 * np.pi * t / 168) + rng.normal(0, 0.4, HOURS)
    return torch.tensor(y, dtype=torch.float32)


def lag_matrix(y, lags, start, stop):
    rows = torch.arange(start, stop)
    return torch.stack([y[rows - lag] for lag in lags], dim=1), y[rows]


class Member(torch.nn.Module):
    def __init__(self, lags):
        super().__init__()
        self.lags = lags
        self.inp = weight_norm(torch.nn.Linear(len(lags), 32))
        self.out = torch.nn.Linear(32, 1)

    def forward(self, x):
        return self.out(torch.relu(self.inp(x))).squeeze(-1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    y = sensor()
    mu, sd = y[:-VALID].mean(), y[:-VALID].std()
    z = (y - mu) / sd

    lags = LAG_SETS[rank % len(LAG_SETS)]
    x, t = lag_matrix(z, lags, max(lags), HOURS - VALID)
    member = Member(lags)
    opt = torch.optim.Adam(member.parameters(), lr=1e-2)
    for step in range(200):
        idx = torch.randint(0, x.shape[0], (256,))
        loss = torch.nn.functional.mse_loss(member(x[idx]), t[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: member with lags {lags} train mse {loss.item():.4f}", flush=True)

    members = [None] * world
    dist.all_gather_object(members, member.eval())

    with torch.no_grad():
        preds = []
        for m in members:
            xv, tv = lag_matrix(z, m.lags, HOURS - VALID, HOURS)
            preds.append(m(xv))
        ens = torch.stack(preds).mean(0)
        mae = ((ens - tv).abs().mean() * sd).item()
    if rank == 0:
        print(f"ensemble of {len(members)} members: validation MAE {mae:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
