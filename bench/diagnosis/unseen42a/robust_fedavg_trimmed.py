"""Byzantine-robust federated averaging: each rank is a client that trains locally,
then the clients exchange their model deltas and apply a coordinate-wise trimmed mean
(Yin et al. 2018) so a few poisoned clients cannot drag the global model."""
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

ROUNDS = 3
LOCAL_EPOCHS = 2
TRIM_RATIO = 0.2


def client_shard(client, n=256, dim=12):
    g = torch.Generator().manual_seed(31 + client)
    x = torch.randn(n, dim, generator=g)
    labels = (x[:, 0] + x[:, 1] > 0).long()
    return x, labels


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def load_flat(model, vec):
    i = 0
    for p in model.parameters():
        p.data.copy_(vec[i:i + p.numel()].view_as(p))
        i += p.numel()


def trimmed_mean(stacked, ratio):
    n = stacked.shape[0]
    if n == 1:
        return stacked[0]
    k = max(1, int(math.floor(ratio * n)))
    ordered, _ = torch.sort(stacked, dim=0)
    return ordered[k:n - k].mean(dim=0)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 2))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    x, labels = client_shard(rank)
    loss_fn = nn.CrossEntropyLoss()

    for r in range(ROUNDS):
        start = flat(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(LOCAL_EPOCHS):
            for b in range(0, len(x), 32):
                opt.zero_grad()
                loss = loss_fn(model(x[b:b + 32]), labels[b:b + 32])
                loss.backward()
                opt.step()
        delta = flat(model) - start
        gathered = [torch.empty_like(delta) for _ in range(world)]
        dist.all_gather(gathered, delta)
        agg = trimmed_mean(torch.stack(gathered), TRIM_RATIO)
        if not torch.isfinite(agg).all():
            raise FloatingPointError(f"round {r}: aggregated update has non-finite entries")
        load_flat(model, start + agg)
        with torch.no_grad():
            acc = (model(x).argmax(1) == labels).float().mean().item()
        print(f"[client {rank}/{world}] round {r} loss={loss.item():.4f} local_acc={acc:.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
