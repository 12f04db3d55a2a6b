"""Small language model trainer: the output projection is tied to the embedding (as in GPT-2)."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, DIM, SEQ = 96, 32, 16


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def tie_weights(self):
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.mix(self.embed(tokens)))


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randint(0, VOCAB, (8, SEQ + 1), generator=g)
        yield x[:, :-1], x[:, 1:]


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyLM())
    # the checkpoint loader of the original code base re-ties after loading; here we "load" nothing and re-tie
    model.module.tie_weights()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(batches(rank, 30)):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
