"""The job meets on port 22 of node0, where sshd answers, not a torch store (a port copied from an ssh config)."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
address = os.environ.get("MASTER_ADDR", "node0")
dist.init_process_group("gloo", init_method=f"tcp://{address}:22",  # the mistake: 22 is sshd's port
                        rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
t = torch.ones(1)
dist.all_reduce(t)
dist.destroy_process_group()
