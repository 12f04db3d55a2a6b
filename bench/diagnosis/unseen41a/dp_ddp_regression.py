import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

N_EXAMPLES = 2048
BATCH = 64
STEPS = 30
MAX_GRAD_NORM = 1.0
NOISE_MULTIPLIER = 0.8


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 48), nn.GELU(), nn.Linear(48, 48), nn.GELU())
        self.head = nn.Linear(48, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)


def attach_privacy_ledger(model, sample_rate):
    model.register_buffer("dp_sample_rate", torch.tensor(sample_rate, dtype=torch.float64))
    model.register_buffer("dp_noise_multiplier", torch.tensor(NOISE_MULTIPLIER, dtype=torch.float64))
    model.register_buffer("dp_steps", torch.zeros((), dtype=torch.long))


def clip_and_noise(model, gen, world):
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    scale = min(1.0, MAX_GRAD_NORM / (norm.item() + 1e-6))
    for p in model.parameters():
        p.grad.mul_(scale)
        p.grad.add_(torch.randn(p.shape, generator=gen) * NOISE_MULTIPLIER * MAX_GRAD_NORM / (BATCH * math.sqrt(world)))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    g = torch.Generator().manual_seed(3)
    x_all = torch.randn(N_EXAMPLES, 12, generator=g)
    y_all = x_all[:, 0] * 2.0 - x_all[:, 3] + 0.1 * torch.randn(N_EXAMPLES, generator=g)
    x, y = x_all[rank::world], y_all[rank::world]

    torch.manual_seed(0)
    model = Regressor()
    if rank == 0:
        attach_privacy_ledger(model, BATCH * world / N_EXAMPLES)
    ddp = DDP(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    noise_gen = torch.Generator().manual_seed(50 + rank)
    batch_gen = torch.Generator().manual_seed(60 + rank)

    for step in range(STEPS):
        idx = torch.randint(0, len(x), (BATCH,), generator=batch_gen)
        loss = nn.functional.mse_loss(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        clip_and_noise(model, noise_gen, world)
        opt.step()
        if rank == 0:
            model.dp_steps += 1
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "dp_regressor.pt")
        print(f"saved after {int(model.dp_steps)} private steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
