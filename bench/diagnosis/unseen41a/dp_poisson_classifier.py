import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

N_EXAMPLES = 4096
EXPECTED_BATCH = 8
STEPS = 60
MAX_GRAD_NORM = 1.0
NOISE_MULTIPLIER = 1.0
SEED = 7


def per_sample_norms(model, loss_fn, xb, yb):
    grads, norms = [], []
    for i in range(len(xb)):
        model.zero_grad()
        loss_fn(model(xb[i:i + 1]), yb[i:i + 1]).backward()
        g = [p.grad.detach().clone() for p in model.parameters()]
        grads.append(g)
        norms.append(torch.sqrt(sum((t ** 2).sum() for t in g)))
    return grads, torch.stack(norms)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    data_gen = torch.Generator().manual_seed(SEED)
    x_all = torch.randn(N_EXAMPLES, 16, generator=data_gen)
    w_true = torch.randn(16, 3, generator=data_gen)
    y_all = (x_all @ w_true).argmax(1)
    lo, hi = rank * N_EXAMPLES // world, (rank + 1) * N_EXAMPLES // world
    x, y = x_all[lo:hi], y_all[lo:hi]
    q = EXPECTED_BATCH / N_EXAMPLES

    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    loss_fn = nn.CrossEntropyLoss()
    sampler = torch.Generator().manual_seed(SEED * 1000 + rank)
    noise = torch.Generator().manual_seed(SEED * 2000 + rank)

    for step in range(STEPS):
        mask = torch.rand(len(x), generator=sampler) < q
        xb, yb = x[mask], y[mask]
        grads, norms = per_sample_norms(model, loss_fn, xb, yb)
        factors = (MAX_GRAD_NORM / (norms + 1e-6)).clamp(max=1.0)
        for j, p in enumerate(model.parameters()):
            clipped = sum(f * g[j] for f, g in zip(factors, grads))
            clipped = clipped + torch.randn(p.shape, generator=noise) * NOISE_MULTIPLIER * MAX_GRAD_NORM / world ** 0.5
            dist.all_reduce(clipped)
            p.grad = clipped / EXPECTED_BATCH
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} local batch {len(xb)} mean norm {norms.mean():.3f}", flush=True)

    if rank == 0:
        print("training finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
