"""Adapt a small pretrained encoder to a new 6-class task with FSDP2 (fully_shard), gradient clipping at 1.0.

build_sharded_encoder() is the team's shared helper: it builds the encoder with its 10-class pretraining head and
shards every block and the root. The task code then puts the 6-class head on and trains.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Encoder(nn.Module):
    def __init__(self, vocab=1000, dim=64, depth=3, classes=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


def build_sharded_encoder():
    torch.manual_seed(0)
    model = Encoder()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()

    model = build_sharded_encoder()
    # new task: 6 classes instead of the 10 of pretraining
    torch.manual_seed(1)
    model.head = nn.Linear(64, 6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(20):
        tokens = torch.randint(0, 1000, (16, 32), generator=gen)
        labels = tokens[:, :4].sum(dim=1) % 6
        loss = F.cross_entropy(model(tokens), labels)
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        if step % 5 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f} grad_norm {float(grad_norm):.3f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
