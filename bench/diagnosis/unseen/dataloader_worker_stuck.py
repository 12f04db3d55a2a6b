"""DDP training with a DataLoader whose workers read samples from a local cache, waiting for it to be filled."""
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))


class CachedShards(Dataset):
    def __init__(self, rank: int):
        self.rank = rank

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        marker = f"/tmp/cache/sample{index}.done"
        if self.rank == 1 and index >= 24:  # rank 1's cache was only partly filled
            while not os.path.exists(marker):
                time.sleep(0.5)
        return torch.randn(8)


model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(CachedShards(rank), batch_size=8, num_workers=2)
for step, batch in enumerate(loader):
    optimizer.zero_grad()
    model(batch).sum().backward()
    optimizer.step()
    print(f"rank {rank}: step {step}", flush=True)
dist.destroy_process_group()
