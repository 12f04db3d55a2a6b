"""Wide MLP trained with sharded optimizer state (each rank owns half of the parameters' Adam state and
checkpoints its own shard). Started by hand on each machine:
    python fsize_limit_node1.py --rank R --world-size N   (MASTER_ADDR/MASTER_PORT set)"""
import argparse
import datetime
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def owners(model, world):
    """Balance the parameters over the ranks by size (largest first, to the least loaded rank)."""
    params = list(model.parameters())
    load, owner = [0] * world, [0] * len(params)
    for i in sorted(range(len(params)), key=lambda i: -params[i].numel()):
        r = load.index(min(load))
        owner[i] = r
        load[r] += params[i].numel()
    return owner


def average_gradients(model, world):
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= world


def broadcast_owned(model, owner):
    for i, p in enumerate(model.parameters()):
        dist.broadcast(p.data, src=owner[i])


def save_shard(step, rank, model, opt, owned):
    folder = Path("checkpoints") / f"step_{step:05d}"
    folder.mkdir(parents=True, exist_ok=True)
    shard = {"step": step, "params": [p.detach().clone() for p in owned], "optim": opt.state_dict()}
    torch.save(shard, folder / f"shard_{rank}.pt")
    return folder


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--save-every", type=int, default=5)
    args = parser.parse_args()
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=timeout)
    rank, world = args.rank, args.world_size
    model = build_model()
    owner = owners(model, world)
    owned = [p for i, p in enumerate(model.parameters()) if owner[i] == rank]
    opt = torch.optim.Adam(owned, lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(1, args.steps + 1):
        x = torch.randn(64, 256, generator=g)
        y = torch.randint(0, 10, (64,), generator=g)
        model.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        average_gradients(model, world)
        opt.step()
        broadcast_owned(model, owner)
        if step % args.save_every == 0:
            folder = save_shard(step, rank, model, opt, owned)
            dist.barrier()
            if rank == 0:
                print(f"step {step}: loss {loss.item():.4f}, checkpoint {folder}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
