"""Train a regressor with input normalisation, save it, and check that the saved model reproduces the live one."""
import io
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Regressor(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.mean = torch.zeros(dim)
        self.std = torch.ones(dim)
        self.net = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))

    def fit_normalizer(self, x):
        self.mean = x.mean(0)
        self.std = x.std(0)

    def forward(self, x):
        return self.net((x - self.mean) / self.std).squeeze(-1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(512, 8, generator=g) * torch.linspace(1, 50, 8) + 100.0
    y = ((x - 100.0) / torch.linspace(1, 50, 8)).sum(1)
    model = Regressor()
    model.fit_normalizer(x)
    ddp = DDP(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    shard = slice(rank, None, world)
    for step in range(150):
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[shard]), y[shard])
        loss.backward()
        opt.step()
    live = nn.functional.mse_loss(model(x), y).item()
    print(f"rank {rank} trained, mse {live:.4f}", flush=True)

    blob = io.BytesIO()
    torch.save(model.state_dict(), blob)
    blob.seek(0)
    exported = Regressor()
    exported.load_state_dict(torch.load(blob))
    reloaded = nn.functional.mse_loss(exported(x), y).item()
    print(f"rank {rank} reloaded model mse {reloaded:.4f}", flush=True)
    if abs(reloaded - live) > 1e-4 * max(1.0, live):
        raise RuntimeError(f"export check failed: the saved model gives mse {reloaded:.4f}, the trained one {live:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
