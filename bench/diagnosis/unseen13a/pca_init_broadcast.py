"""Regression on sensor features with a PCA-initialised input projection, data parallel by hand (CPU/gloo).

Each rank fits the PCA basis on its own shard, so rank 0's initial weights are broadcast to every rank before
training; gradients are averaged with one all_reduce over a flat vector. At the end the replicas are compared.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn

FEATURES, COMPONENTS, SAMPLES = 32, 8, 512


class PCARegressor(nn.Module):
    def __init__(self, components: torch.Tensor):
        super().__init__()
        self.proj = nn.Linear(FEATURES, COMPONENTS, bias=False)
        # Initialise the projection with the principal directions (one row per component).
        self.proj.weight = nn.Parameter(components)
        self.head = nn.Sequential(nn.Tanh(), nn.Linear(COMPONENTS, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.head(self.proj(x)).squeeze(-1)


def load_shard(rank: int):
    g = torch.Generator().manual_seed(1000 + rank)
    mixing = torch.randn(FEATURES, FEATURES, generator=torch.Generator().manual_seed(7))
    x = torch.randn(SAMPLES, FEATURES, generator=g) @ mixing
    y = x[:, :4].sum(1) - 0.5 * x[:, 4:8].sum(1) + 0.1 * torch.randn(SAMPLES, generator=g)
    return x, y


def principal_components(x: torch.Tensor) -> torch.Tensor:
    centred = x - x.mean(0)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return vh[:COMPONENTS]  # rows of Vh are the principal directions, largest first


def sync_initial_weights(model: nn.Module) -> None:
    with torch.no_grad():
        for p in model.parameters():
            dist.broadcast(p.data, src=0)


def average_gradients(model: nn.Module, world: int) -> None:
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "30")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # per-rank init; the broadcast below makes the replicas equal

    x, y = load_shard(rank)
    model = PCARegressor(principal_components(x))
    sync_initial_weights(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    for epoch in range(5):
        perm = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(epoch * 100 + rank))
        for i in range(0, SAMPLES, 64):
            idx = perm[i:i + 64]
            loss = nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            average_gradients(model, world)
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}", flush=True)

    # Replicas must be identical after data-parallel training.
    with torch.no_grad():
        mine = torch.stack([p.double().sum() for p in model.parameters()])
        every = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
    for r, theirs in enumerate(every):
        if not torch.allclose(theirs, every[0], rtol=1e-6, atol=1e-8):
            raise RuntimeError(f"rank {rank}: replica of rank {r} differs from rank 0 after training: "
                               f"parameter sums {theirs.tolist()} vs {every[0].tolist()}")
    if rank == 0:
        torch.save(model.state_dict(), "pca_regressor.pt")
        print("replicas agree; saved pca_regressor.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
