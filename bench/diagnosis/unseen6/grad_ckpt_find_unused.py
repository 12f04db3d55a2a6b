"""A small transformer encoder for sequence regression, with activation checkpointing to save memory."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self, dim=32, heads=4, depth=3, checkpointing=True):
        super().__init__()
        self.embed = nn.Linear(8, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.aux = nn.Linear(dim, 1)          # auxiliary head, only used in some experiments
        self.out = nn.Linear(dim, 1)
        self.checkpointing = checkpointing

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True) if self.checkpointing else block(x)
        return self.out(x.mean(dim=1)).squeeze(-1)


def data(rank, steps, batch=8, length=12):
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x = torch.randn(batch, length, 8, generator=g)
        yield x, x[:, :, 0].cumsum(1)[:, -1]


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    # the aux head is not always used, so let DDP find parameters without gradients
    model = DDP(Encoder(), find_unused_parameters=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(data(rank, 20)):
        opt.zero_grad()
        x.requires_grad_(True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
