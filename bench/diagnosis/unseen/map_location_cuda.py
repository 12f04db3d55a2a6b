"""Each rank loads the pretrained checkpoint straight onto its own device."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
if rank == 0:
    torch.save(torch.nn.Linear(8, 2).state_dict(), "pretrained.pt")
dist.barrier()
state = torch.load("pretrained.pt", map_location=f"cuda:{local_rank}")
model = torch.nn.Linear(8, 2)
model.load_state_dict(state)
print(f"rank {rank}: loaded", flush=True)
dist.destroy_process_group()
