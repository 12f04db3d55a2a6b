"""Train a byte-pair tokenizer's merge table on a corpus, then a tiny bigram language model over the tokens,
with DDP across the nodes (torchrun, gloo, CPU)."""
import collections
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CORPUS = ("low lower lowest newer newest wider widest slow slower slowest " * 30).split()


def learn_merges(words, merges=20):
    vocab = collections.Counter(tuple(w) + ("</w>",) for w in words)
    table = []
    for _ in range(merges):
        pairs = collections.Counter()
        for word, freq in vocab.items():
            for a, b in zip(word, word[1:]):
                pairs[a, b] += freq
        if not pairs:
            break
        best = max(pairs, key=pairs.get)
        table.append(best)
        merged = collections.Counter()
        for word, freq in vocab.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += freq
        vocab = merged
    return table, sorted({t for word in vocab for t in word})


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    table, symbols = learn_merges(CORPUS)
    ids = torch.randint(len(symbols), (4096,), generator=torch.Generator().manual_seed(rank))
    torch.manual_seed(0)
    model = DDP(nn.Embedding(len(symbols), len(symbols)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(30):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(ids[:-1]), ids[1:])
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"{len(table)} merges, {len(symbols)} symbols, bigram loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
