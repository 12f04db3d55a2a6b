"""Gathers every rank's embedding of the batch for a contrastive loss; 2 processes per node."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local_world = int(os.environ["LOCAL_WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
embeddings = torch.randn(16, 32)
gathered = [torch.empty_like(embeddings) for _ in range(local_world)]
dist.all_gather(gathered, embeddings)
logits = embeddings @ torch.cat(gathered).T
print(f"rank {rank}: logits {tuple(logits.shape)}", flush=True)
dist.destroy_process_group()
