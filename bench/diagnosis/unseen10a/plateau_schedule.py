"""DDP regression with ReduceLROnPlateau driven by the validation loss of the whole job."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def shard(rank, world, n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = x @ torch.linspace(-1, 1, 8).unsqueeze(1) + 0.8 * torch.randn(n, 1, generator=g)
    return x[rank::world], y[rank::world]


def validation_loss(model, data):
    x, y = data
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model(x), y, reduction="sum")
    stats = torch.stack([loss, torch.tensor(float(len(x)))])
    dist.reduce(stats, dst=0)
    return (stats[0] / stats[1]).item()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    train, val = shard(rank, world, 512, 1), shard(rank, world, 256, 2)
    for epoch in range(12):
        for i in range(0, len(train[0]), 32):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(train[0][i:i + 32]), train[1][i:i + 32]).backward()
            opt.step()
        val_loss = validation_loss(model, val)
        sched.step(val_loss)
        if rank == 0:
            print(f"epoch {epoch}: val_loss {val_loss:.4f} lr {opt.param_groups[0]['lr']:.4f}", flush=True)
    lrs = [None] * world
    dist.all_gather_object(lrs, opt.param_groups[0]["lr"])
    if len(set(lrs)) > 1:
        print(f"rank {rank}: learning rates differ across ranks after training: {lrs}", file=sys.stderr)
        sys.exit(1)
    print(f"rank {rank}: done, lr {lrs[0]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
