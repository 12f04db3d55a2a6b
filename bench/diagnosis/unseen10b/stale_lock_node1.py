"""Text classifier with a vocabulary cached per node under ~/.cache/textcls.

The first process on a node builds the vocabulary; other processes of that node wait for it and read the cache.

Launch: torchrun --nnodes 2 --nproc-per-node 1 ... stale_lock_node1.py
"""
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CACHE = Path.home() / ".cache" / "textcls"
VOCAB = CACHE / "vocab.json"
LOCK = CACHE / "vocab.json.lock"
CORPUS = ["the cat sat on the mat", "a dog ate the bone", "the bird sang a song", "a cat chased the bird"] * 50


def build_vocab():
    words = sorted({w for line in CORPUS for w in line.split()})
    return {w: i for i, w in enumerate(words)}


def node_vocab():
    """Build the vocabulary once per node; concurrent processes wait for the builder."""
    CACHE.mkdir(parents=True, exist_ok=True)
    if VOCAB.exists():
        return json.loads(VOCAB.read_text())
    try:
        fd = os.open(LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        print("vocabulary is being built by another process, waiting", flush=True)
        while LOCK.exists():
            time.sleep(0.5)
        return json.loads(VOCAB.read_text())
    try:
        os.write(fd, str(os.getpid()).encode())
        vocab = build_vocab()
        tmp = VOCAB.with_suffix(".tmp")
        tmp.write_text(json.dumps(vocab))
        tmp.replace(VOCAB)
        return vocab
    finally:
        os.close(fd)
        LOCK.unlink()


def encode(vocab, line, length=8):
    ids = [vocab[w] + 1 for w in line.split()][:length]
    return ids + [0] * (length - len(ids))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    vocab = node_vocab()
    dist.barrier()
    x = torch.tensor([encode(vocab, line) for line in CORPUS])
    y = torch.tensor([int("cat" in line) for line in CORPUS])
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(len(vocab) + 1, 16), nn.Flatten(), nn.Linear(128, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(30):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
