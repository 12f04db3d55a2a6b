"""Per-step losses are summed onto the logging rank with reduce; 2 processes per node."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
logger_rank = rank - local_rank  # the first process of this node logs its node's sum
for step in range(4):
    loss = torch.tensor([float(step + rank)])
    dist.reduce(loss, dst=logger_rank)
    if rank == logger_rank:
        print(f"rank {rank}: step {step} summed loss {loss.item()}", flush=True)
dist.barrier()
dist.destroy_process_group()
