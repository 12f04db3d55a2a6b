"""Rank 0 builds the vocabulary once and writes it; after a barrier every rank reads it."""
import datetime
import json
import os

import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
VOCAB = "/tmp/experiment/vocab.json"
if rank == 0:
    os.makedirs(os.path.dirname(VOCAB), exist_ok=True)
    with open(VOCAB, "w") as f:
        json.dump({w: i for i, w in enumerate(["<pad>", "<unk>", "the", "a", "of"])}, f)
dist.barrier()
with open(VOCAB) as f:
    vocab = json.load(f)
print(f"rank {rank}: vocabulary of {len(vocab)}", flush=True)
dist.barrier()
dist.destroy_process_group()
