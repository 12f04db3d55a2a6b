"""Tabular regression trainer with a OneCycle learning-rate schedule stepped every batch."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CONFIG = {"samples": 1000, "batch_size": 32, "epochs": 3, "max_lr": 0.01}


def make_data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(CONFIG["samples"], 12, generator=g)
    y = x @ torch.randn(12, 1, generator=g) + 0.1 * torch.randn(CONFIG["samples"], 1, generator=g)
    return TensorDataset(x, y)


def steps_per_epoch(n_samples, world):
    """Optimizer steps each rank takes per epoch."""
    return n_samples // world // CONFIG["batch_size"]


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = make_data()
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=CONFIG["batch_size"], sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=CONFIG["max_lr"])
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=CONFIG["max_lr"], epochs=CONFIG["epochs"],
                                                steps_per_epoch=steps_per_epoch(len(data), world))
    for epoch in range(CONFIG["epochs"]):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
