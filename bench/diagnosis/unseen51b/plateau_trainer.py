import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_data(n_train=2048, n_val=512, d=16):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(d, 1, generator=g)
    x = torch.randn(n_train + n_val, d, generator=g)
    y = x @ w + 0.1 * torch.randn(n_train + n_val, 1, generator=g)
    # validation rows are kept in collection order; later sessions come from a drifted sensor
    xv, yv = x[n_train:], y[n_train:].clone()
    drift = torch.arange(n_val).float().unsqueeze(1) / n_val
    yv = yv + 6.0 * drift * torch.randn(n_val, 1, generator=g)
    return x[:n_train], y[:n_train], xv, yv


def shard(t, rank, world):
    per = t.shape[0] // world
    return t[rank * per:(rank + 1) * per]


def evaluate(model, xv, yv):
    model.eval()
    with torch.no_grad():
        loss = nn.functional.mse_loss(model(xv), yv).item()
    model.train()
    return loss


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)

    x, y, xv, yv = make_data()
    x, y = shard(x, rank, world), shard(y, rank, world)
    xv, yv = shard(xv, rank, world), shard(yv, rank, world)

    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.3, patience=1, threshold=0.02)
    min_lr = 1e-3
    batch = 32

    for epoch in range(40):
        perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(epoch))
        total = 0.0
        for i in range(0, x.shape[0], batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item()
        val = evaluate(model, xv, yv)
        sched.step(val)
        lr = opt.param_groups[0]["lr"]
        print(f"[rank {rank}] epoch {epoch} train {total:.3f} val {val:.4f} lr {lr:.5f}", flush=True)
        if lr < min_lr:
            print(f"[rank {rank}] learning rate below {min_lr}, training converged", flush=True)
            break

    if rank == 0:
        torch.save(model.module.state_dict(), "plateau_model.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
