import json
import os
import random
from collections import Counter
from datetime import timedelta

import torch
import torch.distributed as dist

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
WORDS = ["berlin", "bergen", "marta", "martin", "london", "lund", "ran", "walked", "towards", "quickly",
         "meeting", "marseille", "bernard", "hamburg", "today", "yesterday"]


def corpus(n=64, seed=3):
    rng = random.Random(seed)
    sents = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 8))]
        tags = [rng.choice(TAGS) for _ in words]
        sents.append((words, tags))
    return sents


def learn_merges(words, n_merges=40):
    vocab = Counter(tuple(w) + ("</w>",) for w in words)
    merges = {}
    for step in range(n_merges):
        pairs = Counter()
        for sym, c in vocab.items():
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges[best] = step
        new = Counter()
        for sym, c in vocab.items():
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and (sym[i], sym[i + 1]) == best:
                    out.append(sym[i] + sym[i + 1])
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            new[tuple(out)] += c
        vocab = new
    return merges


def share_merges(merges, rank, world):
    if world == 1:
        return merges
    if rank == 0:
        blob = torch.tensor(list(json.dumps(merges).encode()), dtype=torch.uint8)
        size = torch.tensor([blob.numel()])
    else:
        size = torch.tensor([0])
    dist.broadcast(size, src=0)
    if rank != 0:
        blob = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.broadcast(blob, src=0)
    return {tuple(k.split(" ")): v for k, v in json.loads(bytes(blob.tolist()).decode()).items()}


def segment(word, merges):
    sym = list(word) + ["</w>"]
    while True:
        cands = [(merges[(a, b)], i) for i, (a, b) in enumerate(zip(sym, sym[1:])) if (a, b) in merges]
        if not cands:
            return sym
        _, i = min(cands)
        sym = sym[:i] + [sym[i] + sym[i + 1]] + sym[i + 2:]


def align(words, tags, merges):
    pieces, labels = [], []
    for w, t in zip(words, tags):
        sub = segment(w, merges)
        pieces += sub
        labels += [TAGS.index(t)] + [-100] * (len(sub) - 1)
    return pieces, labels


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    data = corpus()
    merges = learn_merges([w for ws, _ in data for w in ws]) if rank == 0 else None
    merges = share_merges(merges, rank, world)

    shard = data[rank::world]
    n_pieces = n_labelled = 0
    for words, tags in shard:
        pieces, labels = align(words, tags, merges)
        assert len(pieces) == len(labels)
        n_pieces += len(pieces)
        n_labelled += sum(1 for l in labels if l != -100)
    stats = torch.tensor([n_pieces, n_labelled, len(shard)])
    dist.all_reduce(stats)
    if rank == 0:
        print(f"{int(stats[2])} sentences -> {int(stats[0])} subwords, {int(stats[1])} labelled", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
