"""Train a deep MLP regressor on tabular features, split into pipeline stages across ranks (GPipe)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

N_FEATURES, WIDTH, DEPTH = 32, 128, 5
BATCH, MICRO, STEPS = 64, 4, 6


def make_layers():
    torch.manual_seed(7)
    layers = [nn.Linear(N_FEATURES, WIDTH), nn.ReLU(inplace=True)]
    for _ in range(DEPTH - 1):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU(inplace=True)]
    layers += [nn.Linear(WIDTH, WIDTH // 2), nn.Linear(WIDTH // 2, 1)]
    return layers


def partition(layers, n_stages):
    bounds = [round(i * len(layers) / n_stages) for i in range(n_stages + 1)]
    return [nn.Sequential(*layers[bounds[i]:bounds[i + 1]]) for i in range(n_stages)]


def out_width(stage):
    linears = [m for m in stage if isinstance(m, nn.Linear)]
    return linears[-1].out_features


def in_width(stage):
    return [m for m in stage if isinstance(m, nn.Linear)][0].in_features


def synthetic(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(BATCH, N_FEATURES, generator=g)
    w = torch.linspace(-1, 1, N_FEATURES)
    y = (x @ w).unsqueeze(1) + 0.1 * torch.randn(BATCH, 1, generator=g)
    return x, y


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    stage = partition(make_layers(), world)[rank]
    is_first, is_last = rank == 0, rank == world - 1
    opt = torch.optim.SGD(stage.parameters(), lr=0.01, momentum=0.9)
    mb = BATCH // MICRO
    print(f"[rank {rank}] owns {[type(m).__name__ for m in stage]}", flush=True)

    for step in range(STEPS):
        x, y = synthetic(step)
        saved = []
        loss_sum = 0.0
        for i in range(MICRO):
            if is_first:
                inp = x[i * mb:(i + 1) * mb]
            else:
                inp = torch.zeros(mb, in_width(stage))
                dist.recv(inp, src=rank - 1)
                inp.requires_grad_(True)
            out = stage(inp)
            if is_last:
                loss = F.mse_loss(out, y[i * mb:(i + 1) * mb]) / MICRO
                loss_sum += loss.item()
            else:
                dist.send(out.detach().contiguous(), dst=rank + 1)
                loss = None
            saved.append((inp, out, loss))
        for inp, out, loss in reversed(saved):
            if is_last:
                loss.backward()
            else:
                g = torch.zeros(mb, out_width(stage))
                dist.recv(g, src=rank + 1)
                out.backward(g)
            if not is_first:
                dist.send(inp.grad.contiguous(), dst=rank - 1)
        opt.step()
        opt.zero_grad()
        if is_last:
            print(f"[rank {rank}] step {step} mse {loss_sum:.4f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
