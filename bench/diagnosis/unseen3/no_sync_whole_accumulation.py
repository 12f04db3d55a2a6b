"""Regression model trained with DDP and gradient accumulation (4 micro-batches per optimizer step).

Gradient communication is skipped while accumulating: one all-reduce per optimizer step is enough.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUM = 4
STEPS = 8
MICRO_BATCH = 16


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    true_w = torch.linspace(-1, 1, 20)
    data = torch.Generator().manual_seed(7 + rank)

    for step in range(STEPS):
        with model.no_sync():
            for _ in range(ACCUM):
                x = torch.randn(MICRO_BATCH, 20, generator=data)
                y = (x @ true_w).unsqueeze(1) + 0.1 * torch.randn(MICRO_BATCH, 1, generator=data)
                loss = F.mse_loss(model(x), y) / ACCUM
                loss.backward()
        opt.step()
        opt.zero_grad()
        if rank == 0:
            print(f"step {step}: loss {loss.item() * ACCUM:.4f}", flush=True)

    # every replica must hold the same weights before rank 0 writes the checkpoint
    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).double()
    digest = torch.stack([flat.sum(), flat.norm()])
    digests = [torch.zeros_like(digest) for _ in range(world)]
    dist.all_gather(digests, digest)
    spread = max((d - digests[0]).abs().max().item() for d in digests)
    if spread > 1e-6:
        raise RuntimeError(f"model replicas differ after training (max digest difference {spread:.3e} across "
                           f"{world} ranks); not saving the checkpoint")
    if rank == 0:
        torch.save(model.module.state_dict(), "regressor.pt")
        print("saved regressor.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
