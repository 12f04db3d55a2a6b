"""Train a tabular MLP classifier with DDP on 2 nodes.

Every process seeds its RNGs with seed + rank (so that dropout and augmentation noise differ per rank, as in
DETR's main.py), then builds the model from the same config. DDP's initial broadcast is skipped with
init_sync=False to save start-up time, since every rank builds the model from the same config anyway.
At the end every rank scores the same held-out set and the job checks that all ranks agree.
"""
import os
import random
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

SEED = 42


def make_data(n, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 20, generator=gen)
    y = ((x[:, :5].sum(dim=1) > 0).long() + (x[:, 5:10].sum(dim=1) > 0).long())
    return TensorDataset(x, y)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()

    seed = SEED + rank
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 3))
    ddp = DDP(model, init_sync=False)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    train = make_data(1024, seed=SEED)
    sampler = DistributedSampler(train, shuffle=True, seed=SEED)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        ddp.train()
        for x, y in loader:
            x = x + 0.05 * torch.randn_like(x)    # per-rank augmentation noise
            loss = F.cross_entropy(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    # every rank scores the same held-out set: the numbers must agree before we report them
    val_x, val_y = make_data(512, seed=SEED + 1).tensors
    ddp.eval()
    with torch.no_grad():
        val_loss = F.cross_entropy(model(val_x), val_y).reshape(1)
    losses = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(losses, val_loss)
    losses = torch.cat(losses)
    if rank == 0:
        print(f"val loss per rank: {losses.tolist()}", flush=True)
    if (losses - losses[0]).abs().max() > 1e-5:
        raise RuntimeError(f"ranks disagree on the validation loss {losses.tolist()}: model replicas are not "
                           "identical")
    if rank == 0:
        torch.save(model.state_dict(), "mlp.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
