"""DDP training script, adapted from the single-machine DDP tutorial to run under torchrun on several machines."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timeout)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo_basic(rank, world_size):
    setup(rank, world_size)
    print(f"running basic DDP example on rank {rank}.", flush=True)
    model = DDP(ToyModel())
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    for _ in range(10):
        opt.zero_grad()
        loss = F.mse_loss(model(torch.randn(20, 10)), torch.randn(20, 5))
        loss.backward()
        opt.step()
    print(f"rank {rank}: loss {loss.item():.4f}", flush=True)
    cleanup()


if __name__ == "__main__":
    demo_basic(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
