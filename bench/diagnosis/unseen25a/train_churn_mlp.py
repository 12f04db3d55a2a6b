"""Churn model: an MLP with batch-normalised hidden layers, trained with DDP over a tabular dataset."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

N_CUSTOMERS = 1028
N_FEATURES = 20
BATCH_PER_RANK = 16
EPOCHS = 3


def customer_table():
    g = torch.Generator().manual_seed(2024)
    x = torch.randn(N_CUSTOMERS, N_FEATURES, generator=g)
    logit = x[:, 0] * 1.5 - x[:, 3] + 0.5 * x[:, 7] * x[:, 2]
    y = (logit + 0.3 * torch.randn(N_CUSTOMERS, generator=g) > 0).float()
    return TensorDataset(x, y)


def churn_net():
    return nn.Sequential(
        nn.Linear(N_FEATURES, 64), nn.BatchNorm1d(64), nn.ReLU(),
        nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(),
        nn.Linear(32, 1),
    )


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = DDP(churn_net())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.BCEWithLogitsLoss()

    data = customer_table()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=BATCH_PER_RANK, sampler=sampler)

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        model.train()
        total = torch.zeros(2)
        for x, y in loader:
            logits = model(x).squeeze(1)
            loss = loss_fn(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * x.size(0), x.size(0)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch} train bce {total[0] / total[1]:.4f}", flush=True)

    model.eval()
    if rank == 0:
        torch.save(model.module.state_dict(), "churn_mlp.pt")
        print("saved churn_mlp.pt", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
