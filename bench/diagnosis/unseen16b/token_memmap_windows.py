"""Pretrain a tiny next-token model on a memory-mapped token file, each rank reading its own contiguous window.

Rank 0 "tokenises" the corpus once into data/tokens.bin (uint16, nanoGPT style) and writes data/meta.json; after a
barrier every rank memory-maps only its part of the file, so no rank holds the whole corpus in memory.
"""
import datetime
import json
import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 512
CONTEXT = 32
DATA = Path("data")


def tokenise_corpus() -> None:
    """Stand-in for a BPE pass over the raw text: deterministic ids, a corpus length that is whatever it is."""
    rng = np.random.default_rng(1234)
    docs = [rng.integers(1, VOCAB, size=int(rng.integers(50, 400)), dtype=np.uint16) for _ in range(1500)]
    eot = np.zeros(1, dtype=np.uint16)
    tokens = np.concatenate([np.concatenate([d, eot]) for d in docs])
    DATA.mkdir(exist_ok=True)
    tokens.tofile(DATA / "tokens.bin")
    (DATA / "meta.json").write_text(json.dumps({"n_tokens": int(tokens.size), "dtype": "uint16", "vocab": VOCAB}))
    print(f"tokenised {len(docs)} documents into {tokens.size} tokens", flush=True)


def rank_window(rank: int, world_size: int) -> np.memmap:
    meta = json.loads((DATA / "meta.json").read_text())
    # ceil so that no token is dropped: every rank gets the same window length
    per_rank = math.ceil(meta["n_tokens"] / world_size)
    start = rank * per_rank
    print(f"rank {rank}: tokens [{start}, {start + per_rank}) of {meta['n_tokens']}", flush=True)
    return np.memmap(DATA / "tokens.bin", dtype=np.dtype(meta["dtype"]), mode="r",
                     offset=start * np.dtype(meta["dtype"]).itemsize, shape=(per_rank,))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 64)
        self.mix = nn.Linear(64, 64)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, x):
        return self.head(torch.tanh(self.mix(self.emb(x))))


def get_batch(window: np.memmap, gen: torch.Generator, batch_size: int = 16):
    ix = torch.randint(len(window) - CONTEXT - 1, (batch_size,), generator=gen)
    x = torch.stack([torch.from_numpy(window[i:i + CONTEXT].astype(np.int64)) for i in ix.tolist()])
    y = torch.stack([torch.from_numpy(window[i + 1:i + 1 + CONTEXT].astype(np.int64)) for i in ix.tolist()])
    return x, y


def main() -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        tokenise_corpus()
    dist.barrier()
    window = rank_window(rank, world)
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(40):
        x, y = get_batch(window, gen)
        loss = nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
