"""Build a TF-IDF keyword index over the tokenised corpus before training a retriever.
Each rank indexes its own documents; document frequencies are corpus-wide, so they are
summed over the ranks, and the per-rank index sizes are gathered for the manifest."""
import functools
import math
import os
import random
from collections import Counter
from datetime import timedelta

import torch
import torch.distributed as dist

TOP_TERMS = 5


def load_docs(rank):
    rng = random.Random(7 + rank)
    vocab = [f"t{i}" for i in range(12 + 18 * rank)]
    return [[rng.choice(vocab) for _ in range(rng.randint(15, 40))] for _ in range(60)]


class DocFreq:
    def __init__(self, docs):
        self.local = Counter()
        for doc in docs:
            self.local.update(set(doc))
        n = torch.tensor([len(docs)], dtype=torch.int64)
        dist.all_reduce(n)
        self.num_docs = int(n)

    @functools.lru_cache(maxsize=None)
    def global_df(self, term):
        count = torch.tensor([self.local.get(term, 0)], dtype=torch.int64)
        dist.all_reduce(count)
        return int(count)

    def idf(self, term):
        return math.log((1 + self.num_docs) / (1 + self.global_df(term))) + 1.0


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = load_docs(rank)
    df = DocFreq(docs)
    index = {}
    for local_id, doc in enumerate(docs):
        tf = Counter(doc)
        scores = {t: (c / len(doc)) * df.idf(t) for t, c in tf.items()}
        best = sorted(scores.items(), key=lambda kv: -kv[1])[:TOP_TERMS]
        for term, score in best:
            index.setdefault(term, []).append((rank, local_id, round(score, 4)))

    stats = torch.tensor([len(index), sum(len(v) for v in index.values()), len(docs)], dtype=torch.float64)
    gathered = [torch.zeros_like(stats) for _ in range(world)]
    dist.all_gather(gathered, stats)
    if rank == 0:
        for r, s in enumerate(gathered):
            print(f"rank {r}: {int(s[0])} terms, {int(s[1])} postings, {int(s[2])} docs", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
