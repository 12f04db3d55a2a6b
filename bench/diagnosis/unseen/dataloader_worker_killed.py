"""DDP training whose DataLoader workers decode large images; one worker on rank 1 is killed mid-epoch."""
import datetime
import os
import signal

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))


class Images(Dataset):
    def __init__(self, rank: int):
        self.rank = rank

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.rank == 1 and index == 40:
            os.kill(os.getpid(), signal.SIGKILL)  # stands in for the kernel killing a worker that grew too big
        return torch.randn(8)


model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Images(rank), batch_size=8, num_workers=2)
for step, batch in enumerate(loader):
    optimizer.zero_grad()
    model(batch).sum().backward()
    optimizer.step()
print(f"rank {rank}: epoch done", flush=True)
dist.destroy_process_group()
