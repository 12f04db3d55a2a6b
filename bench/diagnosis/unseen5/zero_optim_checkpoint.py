"""DDP + ZeroRedundancyOptimizer (sharded Adam state); rank 0 writes the checkpoint."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def save_checkpoint(model, optimizer, epoch, path="ckpt_epoch{}.pt"):
    if dist.get_rank() == 0:
        torch.save({"epoch": epoch, "model": model.module.state_dict(), "optimizer": optimizer.state_dict()},
                   path.format(epoch))
    dist.barrier()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 8)))
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(2):
        for _ in range(10):
            x = torch.randn(32, 64, generator=g)
            y = torch.randint(0, 8, (32,), generator=g)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        save_checkpoint(model, optimizer, epoch)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
