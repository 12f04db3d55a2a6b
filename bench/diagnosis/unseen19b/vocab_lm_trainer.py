import json
import os
import random
from collections import Counter
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn

SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
MIN_FREQ = 2


def synthetic_corpus(n_lines=400, seed=7):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(600)]
    weights = [1.0 / (i + 1) for i in range(len(words))]
    return [" ".join(rng.choices(words, weights, k=12)) for _ in range(n_lines)]


def load_shard(rank, world):
    lines = synthetic_corpus()
    return lines[rank::world]


def build_vocab(lines, cache_dir):
    path = Path(cache_dir) / "vocab.json"
    if path.exists():
        return json.loads(path.read_text())
    counts = Counter(tok for line in lines for tok in line.split())
    itos = SPECIALS + sorted(t for t, c in counts.items() if c >= MIN_FREQ)
    vocab = {t: i for i, t in enumerate(itos)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(vocab))
    os.replace(tmp, path)
    return vocab


def encode(lines, vocab, seq_len=12):
    unk = vocab["<unk>"]
    ids = [[vocab.get(t, unk) for t in line.split()][:seq_len] for line in lines]
    return torch.tensor(ids, dtype=torch.long)


class BagLM(nn.Module):
    def __init__(self, vocab_size, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab_size)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.head(h)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    lines = load_shard(rank, world)
    vocab = build_vocab(lines, os.environ.get("VOCAB_CACHE", f"cache/rank{rank}"))
    data = encode(lines, vocab)
    print(f"rank {rank}: {len(lines)} lines, vocab {len(vocab)}", flush=True)

    model = nn.parallel.DistributedDataParallel(BagLM(len(vocab)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(2):
        for i in range(0, len(data), 16):
            batch = data[i:i + 16]
            logits = model(batch[:, :-1])
            loss = loss_fn(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
