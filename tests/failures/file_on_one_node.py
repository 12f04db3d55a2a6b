"""Rank 0 builds the vocabulary once and the other ranks load it after a barrier: right on one machine, but the cache
is under /tmp, which is each node's own disk, so the ranks on node1 find nothing."""
import datetime
import json
import os

import torch
import torch.distributed as dist

CACHE = "/tmp/vocab_cache"  # the mistake: a folder of one node's own disk, not one every node sees


def build_vocabulary(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump({word: index for index, word in enumerate("the a of to and in is it".split())}, handle)


rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
vocabulary_file = f"{CACHE}/vocab.json"
if rank == 0:
    build_vocabulary(vocabulary_file)
dist.barrier()  # everyone waits until rank 0 wrote it
with open(vocabulary_file) as handle:
    vocabulary = json.load(handle)
counts = torch.tensor([float(len(vocabulary))])
dist.all_reduce(counts)
print(f"rank {rank}: vocabulary of {len(vocabulary)} words, {counts.item():g} in all")
dist.destroy_process_group()
