"""Small CPU trainer: DDP over gloo with each rank pinned to its own set of cores.

Launch: torchrun --nnodes 2 --nproc-per-node N train_pinned_cpus.py
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = int(os.environ.get("STEPS", "20"))
BATCH = 32
FEATURES = 64


def pin_to_cores():
    rank = int(os.environ["RANK"])
    procs_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    ncores = os.cpu_count() or 1
    per_rank = max(1, ncores // procs_here)
    cores = set(range(rank * per_rank, (rank + 1) * per_rank))
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(per_rank)
    return sorted(cores)


def make_batch(gen):
    x = torch.randn(BATCH, FEATURES, generator=gen)
    y = (x[:, :8].sum(dim=1, keepdim=True) > 0).float()
    return x, y


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    cores = pin_to_cores()
    print(f"rank {rank}/{world}: pinned to cores {cores}, "
          f"{torch.get_num_threads()} intra-op threads", flush=True)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(1000 + rank)

    t0 = time.time()
    for step in range(STEPS):
        x, y = make_batch(gen)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if step % 5 == 0:
            avg = loss.detach().clone()
            dist.all_reduce(avg, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step}: loss {avg.item():.4f}", flush=True)

    elapsed = torch.tensor([time.time() - t0])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"done: {STEPS} steps in {elapsed.item():.2f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
