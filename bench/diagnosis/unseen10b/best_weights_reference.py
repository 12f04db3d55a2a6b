"""Regression MLP with early-stopping style model selection: keep the weights of the epoch with the lowest
validation loss, restore them at the end and report the restored model's validation loss.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... best_weights_reference.py
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 40


def shard(rank, n, seed):
    g = torch.Generator().manual_seed(seed + rank)
    x = torch.randn(n, 8, generator=g)
    y = x[:, 0] - 0.5 * x[:, 1] + 0.8 * torch.randn(n, generator=g)
    return x, y[:, None]


def validate(model, x, y):
    with torch.no_grad():
        loss = nn.functional.mse_loss(model(x), y).reshape(1)
    dist.all_reduce(loss)
    return loss.item() / dist.get_world_size()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x_train, y_train = shard(rank, 48, seed=0)
    x_val, y_val = shard(rank, 200, seed=100)

    best_loss, best_epoch, best_state = float("inf"), -1, None
    for epoch in range(EPOCHS):
        for i in range(0, len(x_train), 16):
            loss = nn.functional.mse_loss(model(x_train[i:i + 16]), y_train[i:i + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = validate(model, x_val, y_val)
        if val < best_loss:
            best_loss, best_epoch, best_state = val, epoch, net.state_dict()
        if rank == 0 and epoch % 5 == 0:
            print(f"epoch {epoch}: train {loss.item():.3f} val {val:.3f}", flush=True)

    net.load_state_dict(best_state)
    restored = validate(model, x_val, y_val)
    dist.destroy_process_group()
    if abs(restored - best_loss) > 1e-4:
        print(f"rank {rank}: restored model (best epoch {best_epoch}, val {best_loss:.4f}) "
              f"now has val {restored:.4f}", flush=True)
        raise SystemExit(1)
    print(f"rank {rank}: best epoch {best_epoch}, val {restored:.4f}", flush=True)


if __name__ == "__main__":
    main()
