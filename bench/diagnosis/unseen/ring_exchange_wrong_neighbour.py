"""Ring exchange of boundary rows (halo exchange) between ranks placed on a ring, 2 processes per node."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
right = (rank + 1) % world
left = (rank - 1) % world
block = torch.full((4, 64), float(rank))
halo = torch.empty(64)
for step in range(3):
    send_req = dist.isend(block[-1].contiguous(), dst=right)
    dist.recv(halo, src=right)
    send_req.wait()
    block[0] = halo
    print(f"rank {rank}: step {step} halo from {int(halo[0])}", flush=True)
dist.destroy_process_group()
