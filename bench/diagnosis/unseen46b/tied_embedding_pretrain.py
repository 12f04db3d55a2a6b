"""Pre-training step for a small GPT-style model with tied input/output embeddings, sharded with FSDP2."""
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

VOCAB = 50304
DIM = 64
HEADS = 4
LAYERS = 2
SEQ = 32
BATCH = 4
STEPS = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, ids):
        t = ids.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.wte(ids) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.ln_f(x))


def shard(model):
    for name in ("wte", "wpe"):
        fully_shard(getattr(model, name))
    for blk in model.blocks:
        fully_shard(blk)
    fully_shard(model.head)
    fully_shard(model)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = GPT()
    shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {avg.item():.3f} ppl {math.exp(avg.item()):.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
