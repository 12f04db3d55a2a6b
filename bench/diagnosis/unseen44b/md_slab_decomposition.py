"""Soft-sphere molecular dynamics in a periodic box, particles split into x-slabs owned by ranks."""
import datetime
import os

import torch
import torch.distributed as dist

N = 2048
BOX = 10.0
DT = 0.002
STEPS = 60
CUTOFF = 0.6


def wrap(x):
    return torch.remainder(x, BOX)


def owner_of(pos, world):
    return (pos[:, 0] / (BOX / world)).long()


def forces(pos):
    d = pos[:, None, :] - pos[None, :, :]
    d = d - BOX * torch.round(d / BOX)
    r = d.norm(dim=-1).clamp_min(1e-6)
    mag = torch.where(r < CUTOFF, (CUTOFF - r) / r, torch.zeros_like(r))
    mag.fill_diagonal_(0.0)
    return (mag[..., None] * d).sum(1)


def migrate(pos, vel, rank, world):
    owner = owner_of(pos, world)
    keep = owner == rank
    send_counts = torch.tensor([int((owner == d).sum()) if d != rank else 0 for d in range(world)])
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    order = [d for d in range(world) if d != rank]
    out = torch.cat([torch.cat([pos[owner == d], vel[owner == d]], 1) for d in order] or [torch.empty(0, 6)])
    incoming = torch.empty(int(recv_counts.sum()), 6)
    in_splits = [int(send_counts[d]) for d in range(world)]
    out_splits = [int(recv_counts[d]) for d in range(world)]
    dist.all_to_all_single(incoming, out, out_splits, in_splits)
    pos = torch.cat([pos[keep], incoming[:, :3]])
    vel = torch.cat([vel[keep], incoming[:, 3:]])
    return pos, vel


def check_conservation(n_local, step):
    total = torch.tensor([n_local])
    dist.all_reduce(total)
    if int(total) != N:
        raise RuntimeError(f"particle count not conserved at step {step}: {int(total)} != {N}")


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    side = round(N ** (1 / 3)) + 1
    axis = torch.linspace(0, BOX, side)
    grid = torch.stack(torch.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
    g = torch.Generator().manual_seed(7)
    all_pos = grid[torch.randperm(len(grid), generator=g)[:N]]
    all_vel = 0.1 * torch.randn(N, 3, generator=g)

    mine = owner_of(all_pos, world) == rank
    pos, vel = all_pos[mine].clone(), all_vel[mine].clone()
    print(f"rank {rank}: owns {len(pos)} of {N} particles", flush=True)
    check_conservation(len(pos), 0)

    for step in range(1, STEPS + 1):
        vel = vel + DT * forces(pos)
        pos = wrap(pos + DT * vel)
        if world > 1:
            pos, vel = migrate(pos, vel, rank, world)
        if step % 20 == 0:
            check_conservation(len(pos), step)
            ke = (0.5 * (vel ** 2).sum()).reshape(1)
            dist.all_reduce(ke)
            if rank == 0:
                print(f"step {step}: kinetic energy {ke.item():.5f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
