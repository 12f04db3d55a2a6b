import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist

NX, NY = 64, 64
ALPHA = 0.2
STEPS = 200


def cartesian_grid(world):
    side = int(math.isqrt(world))
    return side, side


def neighbours(rank, px, py):
    cx, cy = rank // py, rank % py
    def at(i, j):
        if 0 <= i < px and 0 <= j < py:
            return i * py + j
        return None
    return (cx, cy), {"north": at(cx - 1, cy), "south": at(cx + 1, cy),
                      "west": at(cx, cy - 1), "east": at(cx, cy + 1)}


def exchange_halos(u, nb):
    faces = {"north": (1, 0), "south": (-2, -1)}
    for side, (inner, ghost) in faces.items():
        peer = nb[side]
        if peer is None:
            continue
        dist.send(u[inner].contiguous(), dst=peer)
        buf = torch.empty_like(u[ghost])
        dist.recv(buf, src=peer)
        u[ghost] = buf
    for side, (inner, ghost) in {"west": (1, 0), "east": (-2, -1)}.items():
        peer = nb[side]
        if peer is None:
            continue
        dist.send(u[:, inner].contiguous(), dst=peer)
        buf = torch.empty_like(u[:, ghost]).contiguous()
        dist.recv(buf, src=peer)
        u[:, ghost] = buf


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    px, py = cartesian_grid(world)
    (cx, cy), nb = neighbours(rank, px, py)
    bx, by = NX // px, NY // py
    x0, y0 = cx * bx, cy * by
    xs = torch.arange(x0, min(x0 + bx, NX), dtype=torch.float32)
    ys = torch.arange(y0, min(y0 + by, NY), dtype=torch.float32)
    u = torch.zeros(len(xs) + 2, len(ys) + 2)
    X, Y = torch.meshgrid(xs, ys, indexing="ij")
    u[1:-1, 1:-1] = torch.exp(-((X - NX / 2) ** 2 + (Y - NY / 2) ** 2) / 50.0)
    print(f"rank {rank}: block ({cx},{cy}) of {px}x{py}, {len(xs)}x{len(ys)} cells", flush=True)

    for step in range(STEPS):
        exchange_halos(u, nb)
        lap = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        u[1:-1, 1:-1] += ALPHA * lap
        if step % 50 == 0:
            heat = u[1:-1, 1:-1].sum().reshape(1)
            dist.all_reduce(heat)
            if rank == 0:
                print(f"step {step}: total heat {heat.item():.4f}", flush=True)

    heat = u[1:-1, 1:-1].sum().reshape(1)
    dist.all_reduce(heat)
    if rank == 0:
        print(f"done: total heat {heat.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
