"""Regression trainer with a ZeRO-2 style sharded AdamW and dynamic loss scaling.

Gradients are reduce-scattered into a flat buffer, each rank updates its own
slice of the flat parameters and the updated slices are all-gathered back.
A linear probe on detached features tracks an auxiliary quality score.
"""
import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class ShardedAdamW:
    def __init__(self, params, lr=1e-3, weight_decay=0.01):
        self.params = list(params)
        self.world = dist.get_world_size()
        self.rank = dist.get_rank()
        self.numel = sum(p.numel() for p in self.params)
        self.shard = math.ceil(self.numel / self.world)
        flat = torch.zeros(self.shard * self.world)
        flat[: self.numel] = torch.cat([p.detach().reshape(-1) for p in self.params])
        lo = self.rank * self.shard
        self.master = nn.Parameter(flat[lo: lo + self.shard].clone())
        self.inner = torch.optim.AdamW([self.master], lr=lr, weight_decay=weight_decay)
        self.param_groups = self.inner.param_groups
        self.state = self.inner.state

    def reduce_gradients(self):
        flat = torch.zeros(self.shard * self.world)
        flat[: self.numel] = torch.cat([p.grad.reshape(-1) for p in self.params])
        out = torch.zeros(self.shard)
        dist.reduce_scatter(out, list(flat.chunk(self.world)))
        self.master.grad = out / self.world
        for p in self.params:
            p.grad = None

    def step(self):
        self.inner.step()
        parts = [torch.zeros(self.shard) for _ in range(self.world)]
        dist.all_gather(parts, self.master.detach())
        full = torch.cat(parts)[: self.numel]
        offset = 0
        with torch.no_grad():
            for p in self.params:
                p.copy_(full[offset: offset + p.numel()].view_as(p))
                offset += p.numel()

    def zero_grad(self):
        self.inner.zero_grad(set_to_none=True)


class Regressor(nn.Module):
    def __init__(self, d_in=32, hidden=64):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Linear(hidden, 1)
        self.probe = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.head(h).squeeze(-1), self.probe(h.detach()).squeeze(-1)


def make_data(n=512, d_in=32):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, d_in, generator=g)
    y = x[:, :4].sum(dim=1) + 0.1 * torch.randn(n, generator=g)
    quality = torch.rand(n, generator=g)
    quality[77] = float("nan")
    return x, y, quality


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Regressor()
    opt = ShardedAdamW(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)

    x, y, quality = make_data()
    idx = torch.arange(rank, len(x), world)
    batch = 16
    for epoch in range(2):
        for step, start in enumerate(range(0, len(idx), batch)):
            b = idx[start: start + batch]
            pred, qpred = model(x[b])
            loss = F.mse_loss(pred, y[b]) + 0.1 * F.mse_loss(qpred, quality[b])
            scaler.scale(loss).backward()
            opt.reduce_gradients()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            if rank == 0 and step % 4 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} scale {scaler.get_scale():.0f}", flush=True)
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
