"""Jacobi solver for a periodic 2-D Poisson problem on a Cartesian grid of ranks (block decomposition)."""
import datetime
import os

import torch
import torch.distributed as dist

NX, NY = 128, 128
ITERS = 300
TOL = 1e-6


def dims_create(n):
    px = int(n ** 0.5)
    while n % px:
        px -= 1
    return n // px, px


def sendrecv(sendbuf, dest, recvbuf, source, tag):
    ops = [dist.P2POp(dist.isend, sendbuf, dest, tag=tag), dist.P2POp(dist.irecv, recvbuf, source, tag=tag)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()


def halo_exchange(u, nbr):
    buf = torch.empty(u.shape[1] - 2, dtype=u.dtype)
    sendrecv(u[1, 1:-1].contiguous(), nbr["north"], buf, nbr["south"], 10)
    u[-1, 1:-1] = buf
    sendrecv(u[-2, 1:-1].contiguous(), nbr["south"], buf, nbr["north"], 11)
    u[0, 1:-1] = buf
    buf = torch.empty(u.shape[0], dtype=u.dtype)
    sendrecv(u[:, 1].contiguous(), nbr["west"], buf, nbr["east"], 12)
    u[:, -1] = buf
    sendrecv(u[:, -2].contiguous(), nbr["east"], buf, nbr["west"], 13)
    u[:, 0] = buf


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    py, px = dims_create(world)
    cy, cx = divmod(rank, px)
    nbr = {
        "north": ((cy - 1) % py) * px + cx,
        "south": ((cy + 1) % py) * px + cx,
        "west": cy * px + (cx - 1) % px,
        "east": cy * px + (cx + 1) % px,
    }
    ny, nx = NY // py, NX // px
    print(f"rank {rank}: block ({cy},{cx}) of {py}x{px}, {ny}x{nx} cells, neighbours {nbr}", flush=True)

    h = 1.0 / NX
    yy = (torch.arange(ny, dtype=torch.float64) + cy * ny + 0.5) / NY
    xx = (torch.arange(nx, dtype=torch.float64) + cx * nx + 0.5) / NX
    f = torch.sin(2 * torch.pi * yy)[:, None] * torch.cos(2 * torch.pi * xx)[None, :]
    u = torch.zeros(ny + 2, nx + 2, dtype=torch.float64)

    for it in range(ITERS):
        halo_exchange(u, nbr)
        new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + h * h * f)
        res = ((new - u[1:-1, 1:-1]) ** 2).sum().reshape(1)
        u[1:-1, 1:-1] = new
        if it % 50 == 0:
            dist.all_reduce(res)
            if rank == 0:
                print(f"iter {it}: update norm {res.sqrt().item():.3e}", flush=True)
            if res.sqrt().item() < TOL:
                break

    total = u[1:-1, 1:-1].abs().sum().reshape(1)
    dist.all_reduce(total)
    if rank == 0:
        print(f"done: mean |u| = {total.item() / (NX * NY):.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
