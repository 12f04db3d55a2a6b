"""A plain DDP trainer; the launch line derives each node's --node-rank from its line in a host file."""
import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    print(f"{socket.gethostname()}: group rank {os.environ.get('GROUP_RANK')}, "
          f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}", flush=True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(30):
        x, y = torch.randn(32, 10), torch.randint(0, 2, (32,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} done, loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
