"""Sharded optimizer state: each rank saves its own shard of the optimizer state, and the job reloads them to
check that a resume would work."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CKPT_DIR = "ckpt/step_000040"


def shard_path(rank):
    return os.path.join(CKPT_DIR, f"optim_{rank}.pt")


def save_shard(opt, rank):
    os.makedirs(CKPT_DIR, exist_ok=True)
    torch.save(opt.state_dict(), shard_path(rank))


def load_shard(opt, rank):
    path = os.path.join(CKPT_DIR, "optim_{rank}.pt")
    opt.load_state_dict(torch.load(path))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(40):
        x = torch.randn(16, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_shard(opt, rank)
    dist.barrier()
    print(f"rank {rank}: saved {shard_path(rank)}", flush=True)
    load_shard(opt, rank)
    print(f"rank {rank}: reloaded optimizer shard", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
