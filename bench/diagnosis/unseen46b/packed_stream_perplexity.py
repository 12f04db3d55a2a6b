"""Held-out perplexity of a bigram LM over a packed token stream, the stream divided between ranks."""
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 16384
BOS = 1
DIM = 32
NUM_DOCS = 200


def build_stream(seed=7):
    """Concatenate every document, each opened by BOS, into one flat token stream (as the tokenizer job writes it)."""
    g = torch.Generator().manual_seed(seed)
    docs = []
    for _ in range(NUM_DOCS):
        n = int(torch.randint(20, 120, (1,), generator=g))
        body = torch.randint(2, VOCAB, (n,), generator=g)
        docs.append(torch.cat([torch.tensor([BOS]), body]))
    return torch.cat(docs)


def my_slice(stream, rank, world):
    per = stream.numel() // world
    end = stream.numel() if rank == world - 1 else (rank + 1) * per
    return stream[rank * per:end]


def split_documents(tokens):
    starts = (tokens == BOS).nonzero().flatten()
    bounds = torch.cat([starts, torch.tensor([tokens.numel()])])
    return list(torch.split(tokens, bounds.diff().tolist()))


class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.out(self.embed(ids))


@torch.no_grad()
def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Bigram().eval()
    for p in model.parameters():
        dist.broadcast(p, 0)

    tokens = my_slice(build_stream(), rank, world)
    docs = split_documents(tokens)
    nll = torch.zeros((), dtype=torch.float64)
    count = torch.zeros((), dtype=torch.float64)
    for doc in docs:
        if doc.numel() < 2:
            continue
        logits = model(doc[:-1])
        nll += F.cross_entropy(logits, doc[1:], reduction="sum").double()
        count += doc.numel() - 1
    totals = torch.stack([nll, count])
    dist.all_reduce(totals)
    if rank == 0:
        print(f"documents on rank 0: {len(docs)}; tokens scored: {int(totals[1])}; "
              f"perplexity {math.exp(totals[0] / totals[1]):.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
