"""Explicit 1-D heat equation on a rod split into slabs, one slab per rank, with ghost-cell exchange."""
import datetime
import os

import torch
import torch.distributed as dist

N_GLOBAL = 4096
ALPHA = 0.24
STEPS = 400
T_LEFT, T_RIGHT = 1.0, 0.0
PROC_NULL = -1


def sendrecv(sendbuf, dest, recvbuf, source, tag):
    reqs = [dist.isend(sendbuf, dest, tag=tag), dist.irecv(recvbuf, source, tag=tag)]
    for req in reqs:
        req.wait()


def exchange_ghosts(u, left, right):
    to_right, from_left = u[-2:-1].clone(), torch.empty(1, dtype=u.dtype)
    sendrecv(to_right, right, from_left, left, tag=1)
    to_left, from_right = u[1:2].clone(), torch.empty(1, dtype=u.dtype)
    sendrecv(to_left, left, from_right, right, tag=2)
    if left != PROC_NULL:
        u[0] = from_left[0]
    if right != PROC_NULL:
        u[-1] = from_right[0]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    n_local = N_GLOBAL // world + (1 if rank < N_GLOBAL % world else 0)
    left = rank - 1 if rank > 0 else PROC_NULL
    right = rank + 1 if rank < world - 1 else PROC_NULL
    print(f"rank {rank}: {n_local} cells, neighbours {left} / {right}", flush=True)

    u = torch.zeros(n_local + 2, dtype=torch.float64)
    if left == PROC_NULL:
        u[0] = T_LEFT
    if right == PROC_NULL:
        u[-1] = T_RIGHT

    for step in range(STEPS):
        if world > 1:
            exchange_ghosts(u, left, right)
        u[1:-1] = u[1:-1] + ALPHA * (u[:-2] - 2 * u[1:-1] + u[2:])
        if step % 100 == 0:
            heat = u[1:-1].sum().reshape(1)
            dist.all_reduce(heat)
            if rank == 0:
                print(f"step {step}: total heat {heat.item():.4f}", flush=True)

    interior = u[1:-1]
    profile = torch.tensor([interior.min().item(), interior.max().item()], dtype=torch.float64)
    gathered = [torch.empty(2, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(gathered, profile)
    if rank == 0:
        for r, g in enumerate(gathered):
            print(f"slab {r}: T in [{g[0]:.4f}, {g[1]:.4f}]", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
