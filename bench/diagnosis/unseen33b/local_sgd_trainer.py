import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import PostLocalSGDState, post_localSGD_hook
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.optim import PostLocalSGDOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

WARMUP = int(os.environ.get("WARMUP_STEPS", "3"))
PERIOD = int(os.environ.get("AVERAGE_EVERY", "4"))
STEPS = int(os.environ.get("TRAIN_STEPS", "20"))


def make_batch(step, rank, n=32):
    g = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    return x, y


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = DDP(model)

    state = PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=WARMUP)
    ddp.register_comm_hook(state, post_localSGD_hook)

    base = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    averager = PeriodicModelAverager(period=PERIOD, warmup_steps=WARMUP)
    opt = PostLocalSGDOptimizer(optim=base, averager=averager)
    loss_fn = nn.BCEWithLogitsLoss()

    for step in range(STEPS):
        x, y = make_batch(step, rank)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    drift = (flat - ref).abs().max().item()
    print(f"rank {rank}/{world} done, max drift from rank 0 after local SGD: {drift:.3e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
