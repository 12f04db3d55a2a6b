"""Train a small top-1 mixture-of-experts language model with FSDP2 (fully_shard), one unit per expert.

Each expert is its own fully_shard unit so that only the expert being computed is gathered at a time; tokens are
routed top-1 and an expert that received no token in this batch is skipped (no work to do).
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

VOCAB, DIM, EXPERTS = 512, 32, 8


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(DIM, EXPERTS)
        self.experts = nn.ModuleList(Expert() for _ in range(EXPERTS))

    def forward(self, x):
        flat = x.reshape(-1, DIM)
        probs = F.softmax(self.router(flat), dim=-1)
        weight, choice = probs.max(dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            idx = (choice == e).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue  # no token routed to this expert in this batch
            out = out.index_add(0, idx, expert(flat[idx]) * weight[idx, None])
        return x + out.reshape_as(x)


class TinyMoELM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.moe = MoE()
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        return self.lm_head(self.norm(self.moe(self.embed(tokens))))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "600"))))
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = TinyMoELM()
    for expert in model.moe.experts:
        fully_shard(expert)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(30):
        batch = torch.randint(0, VOCAB, (2, 5), generator=gen)   # small per-rank micro-batch
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step} loss {avg.item():.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
