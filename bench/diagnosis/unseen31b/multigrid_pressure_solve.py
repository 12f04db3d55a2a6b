import os
from datetime import timedelta

import torch
import torch.distributed as dist

NY, NX = 65, 64
CYCLES = 4


def halo_rows(u, rank, world):
    up, down = rank - 1, rank + 1
    reqs = []
    if up >= 0:
        reqs.append(dist.isend(u[1].contiguous(), dst=up))
    if down < world:
        reqs.append(dist.isend(u[-2].contiguous(), dst=down))
    if up >= 0:
        buf = torch.empty_like(u[0])
        dist.recv(buf, src=up)
        u[0] = buf
    if down < world:
        buf = torch.empty_like(u[-1])
        dist.recv(buf, src=down)
        u[-1] = buf
    for r in reqs:
        r.wait()


def smooth(u, f, h, rank, world, sweeps=2):
    for _ in range(sweeps):
        halo_rows(u, rank, world)
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                - h * h * f[1:-1, 1:-1])


def residual_norm(u, f, h):
    r = f[1:-1, 1:-1] - (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                         - 4 * u[1:-1, 1:-1]) / (h * h)
    sq = (r ** 2).sum().reshape(1)
    dist.all_reduce(sq)
    return sq.sqrt().item()


def build_levels(rows):
    levels = [rows]
    while rows % 2 == 0 and rows >= 8:
        rows //= 2
        levels.append(rows)
    return levels


def v_cycle(u, f, h, depth, levels, rank, world):
    smooth(u, f, h, rank, world)
    if depth + 1 < len(levels):
        halo_rows(u, rank, world)
        res = torch.zeros_like(f)
        res[1:-1, 1:-1] = f[1:-1, 1:-1] - (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                           + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]) / (h * h)
        fc = torch.zeros(levels[depth + 1] + 2, (f.shape[1] - 2) // 2 + 2, dtype=f.dtype)
        fc[1:-1, 1:-1] = res[1:-1:2, 1:-1:2]
        ec = torch.zeros_like(fc)
        v_cycle(ec, fc, 2 * h, depth + 1, levels, rank, world)
        u[1:-1, 1:-1] += ec[1:-1, 1:-1].repeat_interleave(2, 0).repeat_interleave(2, 1)
    smooth(u, f, h, rank, world)


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    counts = [NY // world + (1 if r < NY % world else 0) for r in range(world)]
    rows = counts[rank]
    levels = build_levels(rows)
    h = 1.0 / NX
    g = torch.Generator().manual_seed(7)
    f = torch.zeros(rows + 2, NX + 2, dtype=torch.float64)
    f[1:-1, 1:-1] = torch.randn(rows, NX, generator=g, dtype=torch.float64)
    u = torch.zeros_like(f)
    print(f"rank {rank}: {rows} rows, {len(levels)} grid levels", flush=True)
    for cycle in range(CYCLES):
        v_cycle(u, f, h, 0, levels, rank, world)
        halo_rows(u, rank, world)
        res = residual_norm(u, f, h)
        if rank == 0:
            print(f"cycle {cycle}: residual {res:.4e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
