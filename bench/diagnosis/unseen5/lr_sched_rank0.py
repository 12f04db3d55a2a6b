"""DDP classifier with a step-decay schedule; rank 0 prints progress."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def log_progress(epoch, loss, scheduler):
    lr = scheduler.get_last_lr()[0]
    print(f"epoch {epoch} loss {loss:.4f} lr {lr:.5f}", flush=True)
    scheduler.step()


def replicas_agree(model):
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    stamp = torch.tensor([flat.sum().item(), flat.abs().sum().item()], dtype=torch.float64)
    stamps = [torch.zeros_like(stamp) for _ in range(dist.get_world_size())]
    dist.all_gather(stamps, stamp)
    return all(torch.allclose(s, stamps[0], rtol=0, atol=1e-9) for s in stamps)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(3)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(4):
        for _ in range(15):
            x = torch.randn(32, 20, generator=g)
            y = torch.randint(0, 4, (32,), generator=g)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            log_progress(epoch, loss.item(), sched)
    if not replicas_agree(model):
        raise RuntimeError(f"rank {rank}: model replicas differ after training")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
