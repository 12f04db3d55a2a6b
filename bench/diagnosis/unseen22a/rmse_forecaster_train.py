"""Train a small load forecaster with DDP; RMSE objective, global loss logged every step."""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

WINDOW = 48
HORIZON = 12
EPOCHS = 2


def make_series(n=4096, seed=7):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n + WINDOW + HORIZON, dtype=torch.float32)
    base = 10 + 3 * torch.sin(2 * math.pi * t / 24) + 1.5 * torch.sin(2 * math.pi * t / 168)
    series = base + 0.3 * torch.randn(t.shape, generator=g)
    x = torch.stack([series[i : i + WINDOW] for i in range(n)])
    y = torch.stack([series[i + WINDOW : i + WINDOW + HORIZON] for i in range(n)])
    return x, y


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WINDOW, 128), nn.GELU(), nn.Linear(128, 64), nn.GELU(),
                                 nn.Linear(64, HORIZON))

    def forward(self, x):
        mu = x.mean(dim=1, keepdim=True)
        return self.net(x - mu) + mu


def rmse(pred, target):
    return torch.sqrt(torch.mean((pred - target) ** 2))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    x, y = make_series()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=64, sampler=sampler, drop_last=True)

    torch.manual_seed(0)
    model = DDP(Forecaster())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    history = []

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        model.train()
        for i, (xb, yb) in enumerate(loader):
            loss = rmse(model(xb), yb)
            if world > 1:
                dist.all_reduce(loss, op=dist.ReduceOp.AVG)
            history.append(loss.item())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if rank == 0 and i % 10 == 0:
                print(f"epoch {epoch} it {i} global rmse {history[-1]:.4f}", flush=True)

    if rank == 0:
        torch.save(model.module.state_dict(), "forecaster.pt")
        print(f"final rmse {sum(history[-10:]) / 10:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
