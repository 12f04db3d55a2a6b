"""Replica-exchange Monte Carlo of a 2-D Ising model: one temperature per rank, swaps between neighbours."""
import datetime
import math
import os

import torch
import torch.distributed as dist

L = 24
SWEEPS = 40
T_MIN, T_MAX = 1.8, 3.2


def make_tag(src, step, kind):
    return (src << 30) | (kind << 28) | (step % (1 << 28))


def energy(s):
    return -(s * torch.roll(s, 1, 0) + s * torch.roll(s, 1, 1)).sum().item()


def metropolis_sweep(s, beta, g):
    for parity in (0, 1):
        mask = ((torch.arange(L)[:, None] + torch.arange(L)[None, :]) % 2) == parity
        nb = torch.roll(s, 1, 0) + torch.roll(s, -1, 0) + torch.roll(s, 1, 1) + torch.roll(s, -1, 1)
        dE = 2 * s * nb
        accept = torch.rand(L, L, generator=g) < torch.exp(-beta * dE)
        s = torch.where(mask & accept, -s, s)
    return s


def exchange(s, e, beta, partner, rank, step, betas):
    mine = torch.tensor([e], dtype=torch.float64)
    theirs = torch.empty(1, dtype=torch.float64)
    reqs = [dist.isend(mine, partner, tag=make_tag(rank, step, 0)),
            dist.irecv(theirs, partner, tag=make_tag(partner, step, 0))]
    for r in reqs:
        r.wait()
    lo, hi = min(rank, partner), max(rank, partner)
    e_lo, e_hi = (e, theirs.item()) if rank == lo else (theirs.item(), e)
    delta = (betas[hi] - betas[lo]) * (e_hi - e_lo)
    u = torch.rand(1, generator=torch.Generator().manual_seed(1000 * step + lo)).item()
    if delta >= 0 or u < math.exp(delta):
        other = torch.empty_like(s)
        reqs = [dist.isend(s.clone(), partner, tag=make_tag(rank, step, 1)),
                dist.irecv(other, partner, tag=make_tag(partner, step, 1))]
        for r in reqs:
            r.wait()
        return other, True
    return s, False


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    temps = [T_MIN * (T_MAX / T_MIN) ** (i / max(world - 1, 1)) for i in range(world)]
    betas = [1.0 / t for t in temps]
    beta = betas[rank]

    g = torch.Generator().manual_seed(rank)
    s = torch.where(torch.rand(L, L, generator=g) < 0.5, 1.0, -1.0)
    swaps = 0
    for step in range(SWEEPS):
        s = metropolis_sweep(s, beta, g)
        if world < 2:
            continue
        if (rank + step) % 2 == 0:
            partner = rank + 1
        else:
            partner = rank - 1
        if 0 <= partner < world:
            s, swapped = exchange(s, energy(s), beta, partner, rank, step, betas)
            swaps += int(swapped)

    stats = torch.tensor([energy(s) / L ** 2, s.mean().abs().item(), float(swaps)], dtype=torch.float64)
    table = [torch.empty(3, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(table, stats)
    if rank == 0:
        for r, row in enumerate(table):
            print(f"T={temps[r]:.3f}: e={row[0]:.4f} |m|={row[1]:.4f} swaps={int(row[2])}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
