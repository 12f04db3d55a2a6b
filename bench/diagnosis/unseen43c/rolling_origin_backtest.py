"""Rolling-origin backtest of an autoregressive forecaster.

Rank 0 fits the model on the training span and compiles it for serving; the
compiled model is shipped to every rank, and each rank scores its own share
of forecast origins over the hold-out span. MAE/RMSE are summed over ranks.
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist

LAGS = 48
HORIZON = 12
TRAIN_END = 3000
TOTAL = 4000


class ARForecaster(torch.nn.Module):
    def __init__(self, lags: int, horizon: int):
        super().__init__()
        self.hidden = torch.nn.Linear(lags, 32)
        self.head = torch.nn.Linear(32, horizon)

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        level = window.mean(dim=-1, keepdim=True)
        return level + self.head(torch.tanh(self.hidden(window - level)))


def series():
    rng = np.random.default_rng(7)
    t = np.arange(TOTAL)
    y = 50 + 10 * np.sin(2 * np.pi * t / 24) + 4 * np.sin(2 * np.pi * t / 168) + rng.normal(0, 1.0, TOTAL)
    return torch.tensor(y, dtype=torch.float32)


def fit(y):
    torch.manual_seed(0)
    model = ARForecaster(LAGS, HORIZON)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    starts = torch.arange(0, TRAIN_END - LAGS - HORIZON)
    windows = torch.stack([y[s:s + LAGS] for s in starts])
    targets = torch.stack([y[s + LAGS:s + LAGS + HORIZON] for s in starts])
    for step in range(150):
        idx = torch.randint(0, windows.shape[0], (128,))
        loss = torch.nn.functional.mse_loss(model(windows[idx]), targets[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"fit done, train mse {loss.item():.3f}", flush=True)
    return torch.jit.script(model.eval())


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    y = series()

    holder = [fit(y)] if rank == 0 else [None]
    dist.broadcast_object_list(holder, src=0)
    model = holder[0]

    origins = list(range(TRAIN_END, TOTAL - HORIZON, HORIZON))[rank::world]
    stats = torch.zeros(3, dtype=torch.float64)
    with torch.no_grad():
        for o in origins:
            pred = model(y[o - LAGS:o].unsqueeze(0)).squeeze(0)
            err = pred - y[o:o + HORIZON]
            stats += torch.tensor([err.abs().sum().item(), (err * err).sum().item(), err.numel()], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"backtest over {int(stats[2])} points: MAE {stats[0] / stats[2]:.3f} "
              f"RMSE {(stats[1] / stats[2]).sqrt():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
