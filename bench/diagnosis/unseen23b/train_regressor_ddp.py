import argparse
import datetime
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

RUNTIME_DEFAULTS = {
    "OMP_NUM_THREADS": "1",
    "GLOO_SOCKET_IFNAME": "lo",
    "TORCH_CPP_LOG_LEVEL": "ERROR",
    "PYTHONUNBUFFERED": "1",
}


def apply_runtime_defaults():
    for key, value in RUNTIME_DEFAULTS.items():
        os.environ.setdefault(key, value)


def parse_args():
    p = argparse.ArgumentParser(description="tabular regressor, data parallel")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    return p.parse_args()


def make_batch(gen, batch, features, true_w):
    x = torch.randn(batch, features, generator=gen)
    noise = 0.01 * torch.randn(batch, 1, generator=gen)
    return x, x @ true_w + noise


def main():
    args = parse_args()
    apply_runtime_defaults()
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

    torch.manual_seed(0)
    true_w = torch.randn(args.features, 1)
    model = nn.Sequential(nn.Linear(args.features, 64), nn.Tanh(), nn.Linear(64, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)

    start = time.time()
    for step in range(args.steps):
        x, y = make_batch(gen, args.batch, args.features, true_w)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            avg = loss.detach().clone()
            dist.all_reduce(avg)
            avg /= world
            if rank == 0:
                print(f"step {step:3d} loss {avg.item():.4f} rmse {math.sqrt(avg.item()):.4f}", flush=True)

    if rank == 0:
        print(f"trained {args.steps} steps on {world} ranks in {time.time() - start:.1f}s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
