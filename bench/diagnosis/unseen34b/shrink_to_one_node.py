import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 2))


def train(ddp, rank, steps, tag, group=None):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(rank + 17 * len(tag))
    for step in range(steps):
        x = torch.randn(16, 24, generator=g)
        y = (x[:, 0] > 0).long()
        loss = nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            t = loss.detach().clone()
            dist.all_reduce(t, group=group)
            if rank == 0:
                print(f"[{tag}] step {step} loss {t.item() / dist.get_world_size(group):.4f}", flush=True)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))

    model = make_model()
    train(DDP(model), rank, steps=20, tag="full")
    dist.barrier()

    keep = list(range(local_world))
    small = dist.new_group(ranks=keep, timeout=timeout)
    if rank == 0:
        print(f"shrinking from {world} ranks to {keep} for the tail phase", flush=True)
    tail = DDP(model, process_group=small)
    train(tail, rank, steps=20, tag="tail", group=small)

    dist.barrier()
    if rank == 0:
        print("all phases done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
