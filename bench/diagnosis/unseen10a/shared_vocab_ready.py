"""Rank 0 builds the vocabulary and publishes it on a key-value store; the other ranks wait for it, then train."""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist


def timeout():
    return datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60")))


def open_store(rank, world):
    port = int(os.environ["MASTER_PORT"]) + 7
    return dist.TCPStore(os.environ["MASTER_ADDR"], port, world, is_master=(rank == 0), timeout=timeout())


def build_vocab():
    words = "the a of to in and is was for on with as by at from it that this be are".split()
    return {w: i for i, w in enumerate(sorted(set(words)))}


def wait_for_vocab(store):
    while store.get("vocab/status") != "ready":
        time.sleep(0.2)
    return json.loads(store.get("vocab/data"))


def main():
    dist.init_process_group("gloo", timeout=timeout())
    rank, world = dist.get_rank(), dist.get_world_size()
    store = open_store(rank, world)
    if rank == 0:
        vocab = build_vocab()
        store.set("vocab/data", json.dumps(vocab))
        store.set("vocab/status", "ready")
    else:
        vocab = wait_for_vocab(store)
    print(f"rank {rank}: vocabulary of {len(vocab)} words", flush=True)
    torch.manual_seed(0)
    emb = torch.nn.EmbeddingBag(len(vocab), 16)
    for step in range(20):
        emb.zero_grad()
        emb(torch.randint(0, len(vocab), (8, 5))).pow(2).mean().backward()
        dist.all_reduce(emb.weight.grad)
    print(f"rank {rank}: trained", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
