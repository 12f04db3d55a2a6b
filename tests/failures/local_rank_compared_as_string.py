"""The first process of each node builds the tokenised cache, the others wait at a barrier and then read it. The local
rank is read from the environment and never converted: a string ("0") is never equal to the number 0, so no process
builds the cache and every rank fails to open it after the barrier.
"""
import datetime
import json
import os

import torch
import torch.distributed as dist

LOCAL_RANK = os.environ.get("LOCAL_RANK", 0)  # the mistake: a string whenever torchrun sets it
CACHE = "token_cache.json"


def is_first_on_node():
    return LOCAL_RANK == 0


def build_cache(texts):
    vocab = sorted({word for text in texts for word in text.split()})
    with open(CACHE, "w") as out:
        json.dump({word: index for index, word in enumerate(vocab)}, out)


dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if is_first_on_node():
    build_cache(["the cat sat", "on the mat", "a dog ran"])
dist.barrier()
with open(CACHE) as cached:
    vocab = json.load(cached)
counts = torch.tensor([float(len(vocab))])
dist.all_reduce(counts)
print(f"rank {dist.get_rank()}: vocabulary of {len(vocab)}", flush=True)
dist.destroy_process_group()
