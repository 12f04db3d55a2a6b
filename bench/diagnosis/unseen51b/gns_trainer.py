import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

MICRO = 16
SAMPLE_BUDGET = 12288


def grad_sq_norm(model):
    return sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None)


class NoiseScale:
    """Gradient noise scale estimate (McCandlish et al. 2018, appendix A.1) with an EMA."""

    def __init__(self, beta=0.9):
        self.beta, self.g2, self.s = beta, None, None

    def update(self, small_sq, b_small, big_sq, b_big):
        g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
        s = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big)
        self.g2 = g2 if self.g2 is None else self.beta * self.g2 + (1 - self.beta) * g2
        self.s = s if self.s is None else self.beta * self.s + (1 - self.beta) * s
        return max(self.s, 0.0) / max(self.g2, 1e-8)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    n, d = 8192, 32
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    noise_std = torch.linspace(0.05, 3.0, n).unsqueeze(1)
    y = x @ w + noise_std * torch.randn(n, 1, generator=g)
    per = n // world
    x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]

    model = DDP(nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gns = NoiseScale()
    accum, seen, step, cursor = 2, 0, 0, 0

    while seen < SAMPLE_BUDGET:
        opt.zero_grad()
        small_sq = None
        for m in range(accum):
            xb, yb = x[cursor:cursor + MICRO], y[cursor:cursor + MICRO]
            cursor = (cursor + MICRO) % (per - MICRO)
            last = m == accum - 1
            if last:
                loss = nn.functional.mse_loss(model(xb), yb) / accum
                loss.backward()
            else:
                with model.no_sync():
                    loss = nn.functional.mse_loss(model(xb), yb) / accum
                    loss.backward()
            if m == 0 and not last:
                small_sq = grad_sq_norm(model) * accum * accum
        big_sq = grad_sq_norm(model)
        opt.step()
        b_small, b_big = MICRO, MICRO * accum * world
        if small_sq is not None and b_big > b_small:
            b_noise = gns.update(small_sq, b_small, big_sq, b_big)
            accum = min(8, max(1, math.ceil(b_noise / (MICRO * world))))
        seen += MICRO * accum * world
        step += 1
        if step % 5 == 0:
            print(f"[rank {rank}] step {step} seen {seen} loss {loss.item() * accum:.3f} accum {accum}", flush=True)

    print(f"[rank {rank}] done after {step} steps", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
