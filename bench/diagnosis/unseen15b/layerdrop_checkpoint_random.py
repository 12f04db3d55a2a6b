"""Train a deep residual MLP regressor with DDP, LayerDrop (stochastic depth) and activation checkpointing.

Activation checkpointing keeps memory flat with depth; LayerDrop skips each residual layer with probability
p_drop during training (find_unused_parameters=True because a dropped layer gets no gradient).
"""
import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class ResidualLayer(nn.Module):
    def __init__(self, dim, p_drop):
        super().__init__()
        self.p_drop = p_drop
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        if self.training and random.random() < self.p_drop:
            return x  # LayerDrop: skip the whole layer
        return x + self.fc2(F.silu(self.fc1(self.norm(x))))


class DeepMLP(nn.Module):
    def __init__(self, dim=32, depth=8, p_drop=0.3):
        super().__init__()
        self.inp = nn.Linear(16, dim)
        self.layers = nn.ModuleList(ResidualLayer(dim, p_drop) for _ in range(depth))
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            h = checkpoint(layer, h, use_reentrant=False)
        return self.out(h).squeeze(-1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    random.seed(1234 + rank)

    torch.manual_seed(0)
    model = DDP(DeepMLP(), find_unused_parameters=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    gen = torch.Generator().manual_seed(rank)
    w_true = torch.linspace(-1, 1, 16)
    for step in range(50):
        x = torch.randn(64, 16, generator=gen)
        y = x @ w_true + 0.1 * torch.randn(64, generator=gen)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step} mse {loss.item():.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
