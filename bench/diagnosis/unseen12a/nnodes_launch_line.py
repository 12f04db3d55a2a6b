"""Plain DDP training written for torchrun; on the cluster it is started on each node by the team's launch line
    python -m torch.distributed.run --nnodes 3 --nproc-per-node 1 --node-rank $NODE_RANK \
        --master-addr $MASTER_ADDR --master-port $MASTER_PORT nnodes_launch_line.py
(see the case's command)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world} on {os.uname().nodename}", flush=True)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for step in range(50):
        x = torch.randn(32, 16, generator=g)
        loss = (model(x).squeeze(1) - x.sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
