"""FedAvg with partial participation: each round the clients that are online form a
cohort, and only the cohort members average their models (weighted by sample count)
in a process group of their own, so offline clients are not waited for."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

ROUNDS = 3
LOCAL_STEPS = 10


def make_client_data(client, dim=8):
    g = torch.Generator().manual_seed(7 + client)
    n = 150 + 50 * (client % 3)
    x = torch.randn(n, dim, generator=g)
    y = x.sum(dim=1, keepdim=True) * 0.5 + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def is_online(round_idx, client):
    return (3 * round_idx + client) % 4 != 1


def train_locally(model, x, y, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()


def main():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    x, y = make_client_data(rank)

    for r in range(ROUNDS):
        flags = torch.zeros(world, dtype=torch.int64)
        flags[rank] = int(is_online(r, rank))
        dist.all_reduce(flags)
        cohort = [c for c in range(world) if flags[c].item() == 1]
        if rank not in cohort:
            print(f"[client {rank}] round {r}: offline", flush=True)
            continue
        loss = train_locally(model, x, y, LOCAL_STEPS)
        group = dist.new_group(cohort, timeout=timeout, use_local_synchronization=True)
        n = torch.tensor([float(len(x))])
        dist.all_reduce(n, group=group)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(len(x) / n.item())
                dist.all_reduce(p.data, group=group)
        print(f"[client {rank}] round {r}: cohort={cohort} loss={loss:.4f}", flush=True)

    dist.barrier()
    if rank == 0:
        print("done:", [round(v, 3) for v in model.weight.view(-1).tolist()], flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
