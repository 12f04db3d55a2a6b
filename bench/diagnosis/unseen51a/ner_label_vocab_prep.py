import os
import random
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

ENTITY_WORDS = {
    "PER": ["alice", "bob", "carla", "dmitri"],
    "ORG": ["acme", "globex", "initech"],
    "LOC": ["paris", "oslo", "lima", "cairo"],
    "MISC": ["olympics", "euro", "nobel"],
}
FILLER = ["the", "met", "in", "at", "from", "visited", "said", "and", "on", "today"]


def make_corpus(n=48, seed=7):
    rng = random.Random(seed)
    sents = []
    for i in range(n):
        kinds = ["PER", "ORG", "LOC"] if i < n * 3 // 4 else ["PER", "LOC", "MISC"]
        toks, tags = [], []
        for _ in range(rng.randint(4, 9)):
            if rng.random() < 0.35:
                k = rng.choice(kinds)
                span = rng.randint(1, 2)
                for j in range(span):
                    toks.append(rng.choice(ENTITY_WORDS[k]))
                    tags.append(("B-" if j == 0 else "I-") + k)
            else:
                toks.append(rng.choice(FILLER))
                tags.append("O")
        sents.append((toks, tags))
    return sents


class Tagger(nn.Module):
    def __init__(self, vocab, n_labels, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, n_labels)

    def forward(self, x):
        return self.proj(torch.tanh(self.emb(x)))


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    corpus = make_corpus()
    per = (len(corpus) + world - 1) // world
    shard = corpus[rank * per:(rank + 1) * per]

    if rank == 0:
        seen = sorted({t for _, tags in shard for t in tags})
        labels = ["O"] + [t for t in seen if t != "O"]
        obj = [labels]
    else:
        obj = [None]
    dist.broadcast_object_list(obj, src=0)
    label2id = {l: i for i, l in enumerate(obj[0])}

    words = sorted({w for ws in ENTITY_WORDS.values() for w in ws} | set(FILLER))
    word2id = {w: i + 1 for i, w in enumerate(words)}

    encoded = []
    for toks, tags in shard:
        ids = torch.tensor([word2id[w] for w in toks])
        lab = torch.tensor([label2id[t] for t in tags])
        encoded.append((ids, lab))
    print(f"rank {rank}: encoded {len(encoded)} sentences, {len(label2id)} labels", flush=True)

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Tagger(len(word2id) + 1, len(label2id)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(2):
        total = 0.0
        for ids, lab in encoded:
            opt.zero_grad()
            loss = loss_fn(model(ids), lab)
            loss.backward()
            opt.step()
            total += loss.item()
        t = torch.tensor([total, float(len(encoded))])
        dist.all_reduce(t)
        if rank == 0:
            print(f"epoch {epoch} mean loss {t[0] / t[1]:.4f}", flush=True)

    dist.barrier()
    if rank == 0:
        print("label vocabulary:", list(label2id), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
