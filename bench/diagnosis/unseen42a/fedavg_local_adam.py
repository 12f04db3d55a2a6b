"""FedAvg trainer: every rank is one client with its own data; clients keep a local
Adam optimizer and the server step averages both the weights and the Adam moments,
weighted by each client's sample count. Clients may be offline for a round."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

ROUNDS = 4
LOCAL_STEPS = 5
BATCH = 32


def client_data(client, dim=16):
    g = torch.Generator().manual_seed(1000 + client)
    n = 200 + 120 * client
    x = torch.randn(n, dim, generator=g)
    w = torch.linspace(-1, 1, dim)
    y = (x @ w + 0.1 * torch.randn(n, generator=g) > 0).float()
    return x, y


def online(round_idx, client):
    return (round_idx + 2 * client) % 4 != 2


def local_train(model, opt, x, y, steps):
    loss_fn = nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(len(x))
    loss = torch.zeros(())
    for _ in range(steps):
        idx = torch.randint(0, len(x), (BATCH,), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]).squeeze(-1), y[idx])
        loss.backward()
        opt.step()
    return loss.item()


def weighted_average(tensors, weight, total):
    for t in tensors:
        t.mul_(weight)
        dist.all_reduce(t)
        t.div_(total)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = client_data(rank)

    for r in range(ROUNDS):
        active = online(r, rank)
        loss = local_train(model, opt, x, y, LOCAL_STEPS) if active else float("nan")
        weight = float(len(x)) if active else 0.0
        total = torch.tensor([weight])
        dist.all_reduce(total)
        with torch.no_grad():
            weighted_average([p.data for p in model.parameters()], weight, total.item())
            moments = []
            for p in model.parameters():
                state = opt.state[p]
                moments += [state["exp_avg"], state["exp_avg_sq"]]
            weighted_average(moments, weight, total.item())
        print(f"[client {rank}/{world}] round {r} online={active} local_loss={loss:.4f} "
              f"round_samples={int(total.item())}", flush=True)

    dist.barrier()
    if rank == 0:
        print("federated training finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
