import os
from datetime import timedelta

import torch
import torch.distributed as dist

N_PER_RANK = 64
BOX = 10.0
DT = 0.002
STEPS = 60
CKPT_EVERY = 20


class MDSystem:
    def __init__(self, rank, world):
        self.rank, self.world = rank, world
        g = torch.Generator().manual_seed(1234 + rank)
        self.pos = torch.rand(N_PER_RANK, 3, generator=g) * BOX
        self.vel = torch.randn(N_PER_RANK, 3, generator=g) * 0.1
        self.step = 0
        self.comm = dist.new_group(backend="gloo") if world > 1 else None

    def forces(self, all_pos):
        d = self.pos[:, None, :] - all_pos[None, :, :]
        d -= BOX * torch.round(d / BOX)
        r2 = (d ** 2).sum(-1).clamp_min(0.8)
        r2[r2 < 1e-9] = float("inf")
        inv6 = r2 ** -3
        mag = 24 * (2 * inv6 ** 2 - inv6) / r2
        return (mag[..., None] * d).sum(1)

    def gather_positions(self):
        if self.comm is None:
            return self.pos
        parts = [torch.empty_like(self.pos) for _ in range(self.world)]
        dist.all_gather(parts, self.pos, group=self.comm)
        return torch.cat(parts)

    def advance(self):
        f = self.forces(self.gather_positions())
        self.vel += DT * f
        self.pos = (self.pos + DT * self.vel) % BOX
        self.step += 1

    def kinetic_energy(self):
        ke = (0.5 * (self.vel ** 2).sum()).reshape(1)
        if self.comm is not None:
            dist.all_reduce(ke, group=self.comm)
        return ke.item()

    def state(self):
        return dict(vars(self))


def save_checkpoint(system, ckpt_dir):
    os.makedirs(ckpt_dir, exist_ok=True)
    path = os.path.join(ckpt_dir, f"md_step{system.step:05d}_rank{system.rank}.pt")
    torch.save(system.state(), path)
    return path


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    system = MDSystem(rank, world)
    ckpt_dir = os.environ.get("CKPT_DIR", "md_checkpoints")
    for _ in range(STEPS):
        system.advance()
        if system.step % CKPT_EVERY == 0:
            ke = system.kinetic_energy()
            path = save_checkpoint(system, ckpt_dir)
            if rank == 0:
                print(f"step {system.step}: KE={ke:.4f} saved {path}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
