"""The replicas start from the average of every rank's initial weights; the embedding's size comes from the vocabulary."""
import datetime
import os
import tempfile

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
# each rank builds its vocabulary from the corpus shard it tokenised locally
shard = ["the cat sat", "on the mat"] if rank == 0 else ["the dog ran", "far away", "into the fog"]
vocab = sorted({word for line in shard for word in line.split()})
model = torch.nn.Sequential(torch.nn.Embedding(len(vocab) + 2, 32), torch.nn.Linear(32, 8))
for param in model.parameters():
    dist.all_reduce(param.data)
    param.data /= world
print(f"rank {rank}: vocabulary of {len(vocab)}", flush=True)
dist.destroy_process_group()
