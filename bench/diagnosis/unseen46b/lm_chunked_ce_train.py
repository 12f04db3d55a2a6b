"""Small decoder LM trainer with FSDP2 and a memory-friendly chunked cross-entropy head."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

VOCAB = 32000
DIM = 64
LAYERS = 2
SEQ = 64
BATCH = 4
CHUNK = 64
STEPS = 5


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block(DIM) for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.norm(h)

    def chunked_loss(self, hidden, labels):
        # never materialise the full (tokens x vocab) logits at once
        hidden = hidden.reshape(-1, DIM)
        labels = labels.reshape(-1)
        total = hidden.new_zeros(())
        for start in range(0, hidden.size(0), CHUNK):
            h = hidden[start:start + CHUNK]
            logits = h @ self.lm_head.weight.t()
            total = total + F.cross_entropy(logits.float(), labels[start:start + CHUNK], reduction="sum")
        return total / labels.numel()


def batches(rank, steps):
    g = torch.Generator().manual_seed(1234 + rank)
    for _ in range(steps):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
        yield ids[:, :-1], ids[:, 1:]


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyLM()
    for blk in model.blocks:
        fully_shard(blk)
    fully_shard(model.lm_head)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    t0 = time.time()
    for step, (x, y) in enumerate(batches(rank, STEPS)):
        hidden = model(x)
        loss = model.chunked_loss(hidden, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        stat = loss.detach().clone()
        dist.all_reduce(stat)
        if rank == 0:
            print(f"step {step} loss {stat.item() / world:.4f} ({time.time() - t0:.1f}s)", flush=True)
    dist.barrier()
    if rank == 0:
        print("training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
