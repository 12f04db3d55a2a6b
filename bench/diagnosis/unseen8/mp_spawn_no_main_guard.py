"""Launched once per node with lab exec; starts its own 2 local workers with torch.multiprocessing.spawn
(the pattern of the PyTorch DDP tutorial), for a world of nnodes x 2."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

LOCAL_WORKERS = 2


def worker(local_rank, node_rank, nnodes):
    rank = node_rank * LOCAL_WORKERS + local_rank
    world = nnodes * LOCAL_WORKERS
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(0)
    model = DDP(nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for step in range(20):
        x = torch.randn(32, 16, generator=gen)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"trained on {world} workers, final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


parser = argparse.ArgumentParser()
parser.add_argument("--node-rank", type=int, required=True)
parser.add_argument("--nnodes", type=int, required=True)
args = parser.parse_args()
print(f"node {args.node_rank}: starting {LOCAL_WORKERS} workers", flush=True)
mp.spawn(worker, args=(args.node_rank, args.nnodes), nprocs=LOCAL_WORKERS, join=True)
