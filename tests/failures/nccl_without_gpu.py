"""The script asks for nccl and CUDA devices on nodes that have no GPU."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
local_rank = int(os.environ.get("LOCAL_RANK", 0))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("nccl", rank=rank, world_size=world_size,  # the mistake on CPU nodes: use gloo
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
torch.cuda.set_device(local_rank)
value = torch.ones(1, device="cuda")
dist.all_reduce(value)
print(f"rank {rank}: {value.item()}")
dist.destroy_process_group()
