"""Small DDP regression job, launched with torchrun's c10d rendezvous (launch line in cases13a.yaml; it was first
written for one machine and then given --nnodes 2 for two)."""
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world} on {os.uname().nodename}", flush=True)
    torch.manual_seed(0)
    x = torch.randn(2048, 8)
    y = x @ torch.arange(1.0, 9.0).unsqueeze(1)
    xs, ys = x[rank::world], y[rank::world]
    model = DDP(nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(20):
        loss = nn.functional.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"final loss {loss.item():.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
