import os
from datetime import timedelta

import torch
import torch.distributed as dist

NCELLS = 4096
VEL = 1.0
CFL = 0.4
STEPS = 100


def decompose(rank, world):
    per = NCELLS // world
    lo = rank * per
    hi = NCELLS if rank == world - 1 else lo + per
    left = rank - 1 if rank > 0 else None
    right = rank + 1 if rank < world - 1 else None
    return lo, hi, left, right


def exchange(q, left, right):
    ops = []
    if left:
        ops.append(dist.P2POp(dist.isend, q[1:2].clone(), left))
        ops.append(dist.P2POp(dist.irecv, q[0:1], left))
    if right:
        ops.append(dist.P2POp(dist.isend, q[-2:-1].clone(), right))
        ops.append(dist.P2POp(dist.irecv, q[-1:], right))
    if ops:
        for work in dist.batch_isend_irecv(ops):
            work.wait()


def step(q, dx, dt):
    flux = VEL * q[:-1]
    q[1:-1] -= dt / dx * (flux[1:] - flux[:-1])


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    lo, hi, left, right = decompose(rank, world)
    dx = 1.0 / NCELLS
    dt = CFL * dx / VEL
    x = (torch.arange(lo, hi, dtype=torch.float64) + 0.5) * dx
    q = torch.zeros(hi - lo + 2, dtype=torch.float64)
    q[1:-1] = torch.exp(-((x - 0.3) / 0.05) ** 2)
    mass0 = q[1:-1].sum().reshape(1) * dx
    dist.all_reduce(mass0)
    for n in range(STEPS):
        exchange(q, left, right)
        step(q, dx, dt)
        if n % 25 == 0:
            mass = q[1:-1].sum().reshape(1) * dx
            dist.all_reduce(mass)
            if rank == 0:
                print(f"step {n}: mass {mass.item():.6f} (start {mass0.item():.6f})", flush=True)
    peak = q[1:-1].max().reshape(1)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"final peak {peak.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
