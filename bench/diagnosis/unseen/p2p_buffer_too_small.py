"""Rank 0 streams each sample's token ids to rank 1, which decodes them; the sequence length comes from a config."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
MAX_LEN = 512
if rank == 0:
    tokens = torch.randint(0, 30000, (MAX_LEN + 2,))  # BOS and EOS appended after truncation
    dist.send(tokens, dst=1)
else:
    tokens = torch.empty(MAX_LEN, dtype=torch.int64)
    dist.recv(tokens, src=0)
    print(f"rank 1: decoded {tokens.numel()} tokens", flush=True)
dist.destroy_process_group()
