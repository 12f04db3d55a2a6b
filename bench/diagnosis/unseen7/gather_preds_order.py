"""Distributed inference over a test set: every rank predicts its DistributedSampler share, the predictions are
all-gathered and scored against the labels on every rank."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    return TensorDataset(x, (x[:, 0] + 0.5 * x[:, 1] > 0).long())


def train_reference_model():
    """The same deterministic model on every rank (trained on the full training set)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    x, y = dataset(1024, 1).tensors
    for _ in range(150):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@torch.no_grad()
def predict(model, loader):
    return torch.cat([model(xb).argmax(dim=1) for xb, _ in loader])


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = train_reference_model()
    test = dataset(1000, 2)
    loader = DataLoader(test, batch_size=50, sampler=DistributedSampler(test, shuffle=False))
    local = predict(model, loader)
    parts = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(parts, local)
    preds = torch.cat(parts)[: len(test)]
    labels = test.tensors[1]
    acc = (preds == labels).float().mean().item()
    local_labels = torch.stack([test[i][1] for i in DistributedSampler(test, shuffle=False)])
    local_acc = (local == local_labels).float().mean().item()
    print(f"rank {rank}: local accuracy {local_acc:.3f}, gathered accuracy {acc:.3f}", flush=True)
    if abs(acc - local_acc) > 0.1:
        raise RuntimeError(f"gathered test accuracy {acc:.3f} but this rank's own accuracy is {local_acc:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
