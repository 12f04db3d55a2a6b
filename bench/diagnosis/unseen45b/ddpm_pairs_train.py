"""Noise-prediction diffusion trainer with paired (antithetic) timesteps for lower-variance loss estimates."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_TIMESTEPS = 200
GLOBAL_BATCH = 6
DIM = 16
STEPS = 40


def cosine_alphas_cumprod(T, s=0.008):
    steps = torch.arange(T + 1, dtype=torch.float64) / T
    f = torch.cos((steps + s) / (1 + s) * torch.pi / 2) ** 2
    abar = f / f[0]
    betas = (1 - abar[1:] / abar[:-1]).clamp(max=0.999)
    return torch.cumprod(1 - betas, dim=0).float()


class TimeMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = nn.Parameter(torch.randn(16) * 0.1, requires_grad=False)
        self.net = nn.Sequential(nn.Linear(DIM + 32, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(),
                                 nn.Linear(128, DIM))

    def forward(self, x, t):
        ang = t.float().unsqueeze(1) * self.freqs.unsqueeze(0)
        emb = torch.cat([ang.sin(), ang.cos()], dim=1)
        return self.net(torch.cat([x, emb], dim=1))


def sample_timesteps(n, gen):
    t = torch.randint(0, NUM_TIMESTEPS, (n // 2,), generator=gen)
    return torch.cat([t, NUM_TIMESTEPS - 1 - t], dim=0)


def data_batch(n, gen):
    centers = torch.tensor([[1.0] * (DIM // 2) + [-1.0] * (DIM // 2), [-1.0] * DIM])
    idx = torch.randint(0, 2, (n,), generator=gen)
    return centers[idx] + 0.1 * torch.randn(n, DIM, generator=gen)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_batch = GLOBAL_BATCH // world
    torch.manual_seed(42)
    gen = torch.Generator().manual_seed(4242 + rank)

    abar = cosine_alphas_cumprod(NUM_TIMESTEPS)
    model = DDP(TimeMLP())
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)

    running = torch.zeros(2)
    for step in range(STEPS):
        x0 = data_batch(local_batch, gen)
        t = sample_timesteps(local_batch, gen)
        noise = torch.randn(x0.shape, generator=gen)
        a = abar[t].unsqueeze(1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)

        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

        running += torch.tensor([loss.item() * local_batch, float(local_batch)])
        if (step + 1) % 10 == 0:
            dist.all_reduce(running)
            if rank == 0:
                print(f"step {step + 1} loss {running[0] / running[1]:.4f}", flush=True)
            running.zero_()

    if rank == 0:
        torch.save(model.module.state_dict(), "ddpm_pairs.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
