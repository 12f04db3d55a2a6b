import os
import datetime
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

N_ROWS = 4096
N_NUMERIC = 6
N_REGIONS = 8
EPOCHS = 3
BATCH = 128


def load_shard(rank, world):
    rng = np.random.default_rng(3)
    region = rng.integers(0, N_REGIONS, N_ROWS)
    numeric = rng.normal(0, 1, size=(N_ROWS, N_NUMERIC)).astype(np.float32)
    churn = (numeric[:, 0] + 0.3 * region - 1.0 + rng.normal(0, 0.5, N_ROWS) > 0).astype(np.float32)
    order = np.argsort(region, kind="stable")
    region, numeric, churn = region[order], numeric[order], churn[order]
    lo, hi = rank * N_ROWS // world, (rank + 1) * N_ROWS // world
    return (torch.from_numpy(region[lo:hi]), torch.from_numpy(numeric[lo:hi]),
            torch.from_numpy(churn[lo:hi]))


def standardize(numeric):
    stats = torch.stack([numeric.sum(0), (numeric ** 2).sum(0),
                         torch.full((N_NUMERIC,), float(numeric.shape[0]))])
    dist.all_reduce(stats)
    mean = stats[0] / stats[2]
    std = (stats[1] / stats[2] - mean ** 2).clamp_min(1e-6).sqrt()
    return (numeric - mean) / std


def build_features(region, numeric):
    onehot = F.one_hot(region).float()
    return torch.cat([standardize(numeric), onehot], dim=1)


class ChurnMLP(nn.Module):
    def __init__(self, in_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                                 nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    region, numeric, churn = load_shard(rank, dist.get_world_size())
    x = build_features(region, numeric)
    model = DDP(ChurnMLP(x.shape[1]))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(EPOCHS):
        perm = torch.randperm(x.shape[0], generator=g)
        total = torch.zeros(2)
        for i in range(0, x.shape[0], BATCH):
            idx = perm[i:i + BATCH]
            loss = F.binary_cross_entropy_with_logits(model(x[idx]), churn[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * idx.numel(), idx.numel()])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: logloss {total[0] / total[1]:.4f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "churn_mlp.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
