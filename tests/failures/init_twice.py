"""A setup helper initialises the process group, and the training entry point calls it again."""
import datetime
import os

import torch
import torch.distributed as dist

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10)))


def setup_distributed():
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=TIMEOUT)


setup_distributed()
model = torch.nn.Linear(4, 4)
setup_distributed()  # the bug: the trainer sets up the group again
dist.destroy_process_group()
