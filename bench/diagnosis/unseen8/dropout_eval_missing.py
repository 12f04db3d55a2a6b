"""Each rank scores the same held-out set with the trained classifier; the script checks that every rank
reports the same accuracy (they hold identical weights after DDP)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.3),
                                 nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 2))

    def forward(self, x):
        return self.net(x)


def data(seed, n):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=gen)
    return x, (x[:, :5].sum(1) > 0).long()


@torch.no_grad()
def evaluate(model, x, y):
    return (model(x).argmax(1) == y).float().mean().item()


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234 + rank)            # per-rank seed for augmentation noise
    model = DDP(Classifier())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = data(rank, 1024)
    for epoch in range(4):
        model.train()
        for i in range(0, 1024, 64):
            xb = x[i:i + 64] + 0.05 * torch.randn(64, 20)
            loss = nn.functional.cross_entropy(model(xb), y[i:i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
    xv, yv = data(999, 2000)                 # the same held-out set on every rank
    acc = torch.tensor([evaluate(model.module, xv, yv)])
    accs = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(accs, acc)
    values = [round(a.item(), 4) for a in accs]
    if rank == 0:
        print(f"held-out accuracy per rank: {values}", flush=True)
    dist.destroy_process_group()
    if len(set(values)) != 1:
        raise SystemExit(f"ranks disagree on held-out accuracy of identical weights: {values}")


if __name__ == "__main__":
    main()
