"""Near-duplicate removal by shared document prefix across the whole corpus.

Every rank inserts the leading characters of its documents into a character
trie; the per-rank tries are gathered and merged so that each rank can drop
documents whose prefix was already seen on a lower rank.
"""
import datetime
import os
import random

import torch
import torch.distributed as dist

PREFIX_CHARS = 1200
END = "$"


def make_docs(rank, n=40):
    boiler = "".join(random.Random(0).choice("abcdefgh ") for _ in range(PREFIX_CHARS))
    rng = random.Random(rank)
    docs = []
    for i in range(n):
        if i % 5 == 0:
            docs.append(boiler + f" tail {i}")
        else:
            docs.append("".join(rng.choice("abcdefghijklmnop ") for _ in range(PREFIX_CHARS + 50)))
    return docs


def insert(trie, text):
    node = trie
    for ch in text[:PREFIX_CHARS]:
        node = node.setdefault(ch, {})
    node[END] = True


def contains(trie, text):
    node = trie
    for ch in text[:PREFIX_CHARS]:
        node = node.get(ch)
        if node is None:
            return False
    return END in node


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    docs = make_docs(rank)
    local, kept = {}, []
    for d in docs:
        if not contains(local, d):
            insert(local, d)
            kept.append(d)

    if world > 1:
        tries = [None] * world
        dist.all_gather_object(tries, local)
        earlier = tries[:rank]
        kept = [d for d in kept if not any(contains(t, d) for t in earlier)]

    n = torch.tensor([len(docs), len(kept)])
    dist.all_reduce(n)
    if rank == 0:
        print(f"dedup: {n[0].item()} docs -> {n[1].item()} kept", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
