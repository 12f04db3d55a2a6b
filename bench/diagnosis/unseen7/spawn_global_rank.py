"""Multi-node training launched with torch.multiprocessing.spawn: one launcher per machine, started with
`python spawn_global_rank.py --node-rank N --nnodes 2 --nproc 2`; MASTER_ADDR/MASTER_PORT come from the
environment."""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(local_rank, args):
    world_size = args.nnodes * args.nproc
    rank = args.node_rank + local_rank
    print(f"node {args.node_rank} local {local_rank}: joining as rank {rank} of {world_size}", flush=True)
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for step in range(30):
        x = torch.randn(16, 12, generator=g)
        loss = nn.functional.cross_entropy(model(x), x[:, :3].argmax(dim=1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} done, loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
