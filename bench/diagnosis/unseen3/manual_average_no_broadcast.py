"""Data-parallel training without DDP: each worker averages gradients itself with all_reduce.

Started by hand on each machine:  python manual_average_no_broadcast.py --rank R --world-size N
(MASTER_ADDR / MASTER_PORT point at the first machine).
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args()


def average_gradients(model, world_size):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world_size


def main():
    args = parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    torch.manual_seed(1234 + args.rank)  # each worker shuffles and augments its data its own way
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    centers = torch.tensor([[1.0] * 8, [-1.0] * 8, [0.0] * 8])
    for step in range(args.steps):
        y = torch.randint(0, 3, (32,))
        x = centers[y] + 0.5 * torch.randn(32, 8)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        average_gradients(model, args.world_size)
        opt.step()
        if args.rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    flat = torch.cat([p.detach().flatten() for p in model.parameters()]).double()
    digest = torch.stack([flat.sum(), flat.norm()])
    digests = [torch.zeros_like(digest) for _ in range(args.world_size)]
    dist.all_gather(digests, digest)
    spread = max((d - digests[0]).abs().max().item() for d in digests)
    if spread > 1e-6:
        raise RuntimeError(f"workers ended with different weights (max digest difference {spread:.3e}); "
                           "the averaged model is not well defined")
    if args.rank == 0:
        torch.save(model.state_dict(), "manual_dp.pt")
        print("saved manual_dp.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
