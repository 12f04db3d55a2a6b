"""A script for two terminals (one process per machine): reads MASTER_ADDR/MASTER_PORT, NODE_RANK, NNODES.
Run on each machine inside the team's wrapper `timeout 20 python timeout_wrapped_job.py` (a time budget
copied from the smoke-test job) and trains for a fixed number of epochs, saving a checkpoint at the end."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS = 6


def main():
    rank, world = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    start = time.time()
    for epoch in range(EPOCHS):
        for _ in range(30):
            x = torch.randn(128, 64, generator=g)
            loss = nn.functional.mse_loss(model(x), x[:, :8].sum(dim=1, keepdim=True))
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.2)          # data loading from the (slow) network filesystem
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f} ({time.time() - start:.0f} s)", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "final.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
