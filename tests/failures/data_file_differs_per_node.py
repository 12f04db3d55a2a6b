"""Each node reads its training list from its own disk (~/data/train.txt, synced by hand): node1's copy is an older,
shorter one, so its rank runs out of batches first and leaves while rank 0 waits in DDP's all_reduce. Run with:

  lab exec --copy tests/failures/data_file_differs_per_node.py -- bash -c 'mkdir -p ~/data && seq 1 $((NODE_RANK == 1
    ? 160 : 200)) > ~/data/train.txt; exec python data_file_differs_per_node.py'
"""
import datetime
import os
import pathlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
lines = (pathlib.Path.home() / "data" / "train.txt").read_text().split()
samples = torch.tensor([float(line) for line in lines])
model = DistributedDataParallel(torch.nn.Linear(1, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
for batch in samples.split(20):
    loss = model(batch[:, None]).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"rank {rank}: {len(samples)} samples done")
dist.destroy_process_group()
