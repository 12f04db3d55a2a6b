import datetime
import math
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

N_EXAMPLES = 900
EXPECTED_BATCH = 512
EPOCHS = 3
MAX_GRAD_NORM = 1.0
NOISE_MULTIPLIER = 1.1
DELTA = 1e-5
ORDERS = [1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]


def log_add(a, b):
    hi, lo = max(a, b), min(a, b)
    return hi + math.log1p(math.exp(lo - hi))


def rdp_sampled_gaussian(q, sigma, alpha):
    if not 0 < q < 1:
        raise ValueError(f"sample rate must be in (0, 1), got {q:.4f}")
    alpha = int(math.ceil(alpha))
    log_a = -math.inf
    for k in range(alpha + 1):
        log_coef = math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1)
        term = log_coef + k * math.log(q) + (alpha - k) * math.log(1 - q) + (k * k - k) / (2 * sigma ** 2)
        log_a = log_add(log_a, term)
    return log_a / (alpha - 1)


def epsilon_after(steps, q, sigma):
    best = math.inf
    for a in ORDERS:
        eps = steps * rdp_sampled_gaussian(q, sigma, a) + math.log(1 / DELTA) / (max(a, 2) - 1)
        best = min(best, eps)
    return best


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    g = torch.Generator().manual_seed(0)
    x_all = torch.randn(N_EXAMPLES, 20, generator=g)
    y_all = (x_all[:, :5].sum(1) > 0).long()
    shard = torch.arange(rank, N_EXAMPLES, world)
    x, y = x_all[shard], y_all[shard]

    sample_rate = EXPECTED_BATCH / len(x)
    steps_per_epoch = int(1 / sample_rate)
    planned = epsilon_after(EPOCHS * steps_per_epoch, sample_rate, NOISE_MULTIPLIER)
    if rank == 0:
        print(f"planned epsilon after {EPOCHS} epochs: {planned:.2f}", flush=True)

    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(20, 32), nn.Tanh(), nn.Linear(32, 2))
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = nn.CrossEntropyLoss()
    sampler = torch.Generator().manual_seed(100 + rank)
    noise_gen = torch.Generator().manual_seed(200 + rank)

    for epoch in range(EPOCHS):
        for _ in range(steps_per_epoch):
            mask = torch.rand(len(x), generator=sampler) < sample_rate
            xb, yb = x[mask], y[mask]
            summed = [torch.zeros_like(p) for p in model.parameters()]
            for i in range(len(xb)):
                model.zero_grad()
                loss_fn(model(xb[i:i + 1]), yb[i:i + 1]).backward()
                norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
                scale = min(1.0, MAX_GRAD_NORM / (norm.item() + 1e-6))
                for s, p in zip(summed, model.parameters()):
                    s.add_(p.grad, alpha=scale)
            for s, p in zip(summed, model.parameters()):
                s.add_(torch.randn(s.shape, generator=noise_gen) * NOISE_MULTIPLIER * MAX_GRAD_NORM / math.sqrt(world))
                dist.all_reduce(s)
                p.grad = s / EXPECTED_BATCH
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} done", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
