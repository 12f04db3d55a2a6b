"""DDP training with a DistributedSampler; the script audits that one epoch covers every sample exactly once."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CONFIG = {"seed": 42, "batch_size": 50, "epochs": 2}


def seed_everything(base):
    seed = base + dist.get_rank()        # different augmentation noise per rank
    torch.manual_seed(seed)
    return seed


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    seed = seed_everything(CONFIG["seed"])
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1000, 8, generator=gen)
    ds = TensorDataset(torch.arange(1000), x, x.sum(1, keepdim=True))
    sampler = DistributedSampler(ds, shuffle=True, seed=seed)
    loader = DataLoader(ds, batch_size=CONFIG["batch_size"], sampler=sampler)
    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    problem = None
    for epoch in range(CONFIG["epochs"]):
        sampler.set_epoch(epoch)
        seen = []
        for idx, xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb + 0.01 * torch.randn_like(xb)), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.append(idx)
        mine = torch.cat(seen)
        everyone = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(everyone, mine)
        distinct = torch.cat(everyone).unique().numel()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}, {distinct} distinct samples seen", flush=True)
        if distinct != len(ds):
            problem = (f"data audit failed in epoch {epoch}: the ranks saw {distinct} distinct samples "
                       f"of {len(ds)} ({world * len(mine) - distinct} were seen more than once)")
            break
    dist.destroy_process_group()
    if problem:
        raise SystemExit(problem)


if __name__ == "__main__":
    main()
