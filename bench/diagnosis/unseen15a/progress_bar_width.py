"""Train a small classifier with DDP and draw a progress bar as wide as the terminal on rank 0 (CPU, gloo).

Run with torchrun --nproc-per-node 2 on each node.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def progress(step, total, loss):
    """One console line: [#####.....] step/total loss, fitted to the terminal."""
    width = max(10, os.get_terminal_size().columns - 32)
    done = width * step // total
    print(f"\r[{'#' * done}{'.' * (width - done)}] {step}/{total} loss {loss:.4f}", end="", flush=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 5)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    total = 60
    for step in range(1, total + 1):
        x = torch.randn(32, 20, generator=g)
        y = torch.randint(0, 5, (32,), generator=g)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            progress(step, total, loss.item())
    if rank == 0:
        print()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
